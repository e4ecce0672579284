#!/usr/bin/python3
"""tests/fuzz/make-tls-seeds.py DIR — write fuzz_tls_entry's named seed
inputs into DIR (tests/fuzz/corpus/fuzz_tls_entry holds the committed
ones): real ClientHellos from Python's ssl module (OpenSSL) on memory BIOs,
a TLS 1.0 one, a truncated one, an SSLv2-format hello, a plaintext client's
ApiVersions, and a client's whole side of a mutual-TLS handshake with a
server holding the target's certificate (read from fuzz_tls_entry.c). Each
input is the target's 4-byte header (listener kind, piece sizes) and the
bytes. Randoms and key shares differ from run to run."""
import os
import re
import ssl
import struct
import sys
import tempfile
import warnings

out = sys.argv[1]
here = os.path.dirname(os.path.abspath(__file__))
csrc = open(os.path.join(here, 'fuzz_tls_entry.c')).read()


def pem(name):
    body = re.search(r'static const char %s\[\] =\n(.*?);\n' % name, csrc, re.S).group(1)
    return '\n'.join(re.findall(r'"(.*?)\\n"', body)) + '\n'


tmp = tempfile.mkdtemp()
CERT, KEY = os.path.join(tmp, 'cert.pem'), os.path.join(tmp, 'key.pem')
open(CERT, 'w').write(pem('cert_pem'))
open(KEY, 'w').write(pem('key_pem'))
warnings.simplefilter('ignore', DeprecationWarning)   # ssl.TLSVersion.TLSv1, on purpose


def hello(minv, maxv, seclevel0=False):
    c = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    c.check_hostname = False; c.verify_mode = ssl.CERT_NONE
    if seclevel0: c.set_ciphers('DEFAULT:@SECLEVEL=0')
    c.minimum_version = minv; c.maximum_version = maxv
    i, o = ssl.MemoryBIO(), ssl.MemoryBIO()
    s = c.wrap_bio(i, o, server_side=False, server_hostname='broker')
    try: s.do_handshake()
    except ssl.SSLWantReadError: pass
    return o.read()

def transcript(maxv):
    """All a real client (with a certificate) sends to a real server with this key."""
    sc = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER); sc.load_cert_chain(CERT, KEY)
    sc.load_verify_locations(CERT); sc.verify_mode = ssl.CERT_REQUIRED; sc.maximum_version = maxv
    cc = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT); cc.check_hostname = False; cc.verify_mode = ssl.CERT_NONE
    cc.load_cert_chain(CERT, KEY); cc.maximum_version = maxv
    si, so, ci, co = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    s = sc.wrap_bio(si, so, server_side=True); c = cc.wrap_bio(ci, co, server_hostname='broker')
    sent = b''; cdone = sdone = False
    for _ in range(10):
        if not cdone:
            try: c.do_handshake(); cdone = True
            except ssl.SSLWantReadError: pass
        b = co.read(); sent += b; si.write(b)
        if not sdone:
            try: s.do_handshake(); sdone = True
            except ssl.SSLWantReadError: pass
        ci.write(so.read())
        if cdone and sdone: break
    c.write(apiversions)
    sent += co.read()
    return sent

# ApiVersions v3: size, api key 18, version 3, correlation id 1, client id
# "kcat", tagged fields, client_software_name "sluice", version "1.0", tags
body = struct.pack('>hhih', 18, 3, 1, 4) + b'kcat' + b'\x00' + b'\x07sluice' + b'\x041.0' + b'\x00'
apiversions = struct.pack('>i', len(body)) + body

h12 = hello(ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_2)
h13 = hello(ssl.TLSVersion.TLSv1_3, ssl.TLSVersion.TLSv1_3)
try:
    h10 = hello(ssl.TLSVersion.TLSv1, ssl.TLSVersion.TLSv1, True)
except Exception as e:
    print('tls1.0:', e); h10 = None
# SSLv2-format CLIENT-HELLO (RFC 5246 appendix E.2), offering TLS 1.2
specs = bytes.fromhex('00c02f' '00c02b' '00009c' '00002f' '0000ff')
challenge = os.urandom(16)
v2body = bytes([1, 3, 3]) + struct.pack('>hhh', len(specs), 0, len(challenge)) + specs + challenge
v2 = struct.pack('>H', 0x8000 | len(v2body)) + v2body

seeds = {
    'tls12-clienthello': (b'\x00\x00\x00\x00', h12),
    'tls12-clienthello-pieces': (b'\x02\x01\x05\x40', h12),
    'tls13-clienthello': (b'\x00\x00\x00\x00', h13),
    'tls13-clienthello-only13': (b'\x01\x03\x00\x20', h13),
    'tls12-clienthello-to-13-only': (b'\x01\x00\x00\x00', h12),
    'tls13-clienthello-truncated': (b'\x00\x00\x00\x00', h13[:len(h13) // 2]),
    'sslv2-clienthello': (b'\x00\x00\x00\x00', v2),
    'plaintext-apiversions': (b'\x00\x00\x00\x00', apiversions),
    'tls12-client-cert-transcript': (b'\x03\x00\x00\x00', transcript(ssl.TLSVersion.TLSv1_2)),
    'tls13-client-cert-transcript': (b'\x03\x00\x00\x00', transcript(ssl.TLSVersion.TLSv1_3)),
}
if h10: seeds['tls10-clienthello'] = (b'\x00\x00\x00\x00', h10)
for name, (hdr, b) in seeds.items():
    open(os.path.join(out, name), 'wb').write(hdr + b)
    print(name, len(b), 'bytes')
os.unlink(CERT)
os.unlink(KEY)
os.rmdir(tmp)
