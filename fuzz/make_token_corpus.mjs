// Regenerates the seed corpus of fuzz/fuzz_token.c in fuzz/corpus/token/:
//   node fuzz/make_token_corpus.mjs fuzz/corpus/token
// Tokens are signed with the fixed keys fuzz_token.c trusts (RFC 8032 test
// vectors 1 and 2 as kid fuzz-k1 / fuzz-k2), so the fuzzer starts past the
// signature check. The first byte of each file picks fuzz_token.c's mode.
// Ed25519 is deterministic: the output is the same on every run.
import { writeFileSync } from 'node:fs';
const { importJWK, SignJWT, CompactSign, base64url } = await import('jose');
const out = process.argv[2];
const d1 = base64url.encode(Buffer.from('9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60', 'hex'));
const d2 = base64url.encode(Buffer.from('4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb', 'hex'));
const x1 = '11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo', x2 = 'PUAXw-hDiVqStwqnTRt-vJyYLM8uxJaMwM1V8Sr0Zgw';
const k1 = await importJWK({ kty: 'OKP', crv: 'Ed25519', x: x1, d: d1 }, 'EdDSA');
const k2 = await importJWK({ kty: 'OKP', crv: 'Ed25519', x: x2, d: d2 }, 'EdDSA');
const base = { iss: 'airlockd', aud: 'fuzz-sb', sub: 'user:fuzz', scope: 'runner:connect terminal:read', iat: 1700000000, nbf: 1700000000, exp: 4000000000, jti: 'AAAAAAAAAAAAAAAAAAAAAA' };
const sign = (claims, key, hdr) => new SignJWT(claims).setProtectedHeader(hdr).sign(key);
const w = (name, mode, text) => writeFileSync(`${out}/${name}`, Buffer.concat([Buffer.from([mode]), Buffer.from(text)]));
const enc = (o) => base64url.encode(typeof o === 'string' ? o : JSON.stringify(o));
const raw = (h, c, s) => `${enc(h)}.${enc(c)}.${s}`;

const good1 = await sign(base, k1, { alg: 'EdDSA', typ: 'JWT', kid: 'fuzz-k1' });
const good2 = await sign({ ...base, aud: ['x', 'fuzz-sb'] }, k2, { alg: 'EdDSA', kid: 'fuzz-k2' });
w('valid_k1', 1, good1);
w('valid_k2_aud_array', 1, good2);
w('expired', 1, await sign({ ...base, exp: 1700000100 }, k1, { alg: 'EdDSA', kid: 'fuzz-k1' }));
w('wrong_scope', 1, await sign({ ...base, scope: 'runner:connectx' }, k1, { alg: 'EdDSA', kid: 'fuzz-k1' }));
w('dup_claims', 1, await new CompactSign(new TextEncoder().encode('{"aud":"a","aud":"fuzz-sb","sub":"s","scope":"runner:connect","exp":4000000000}')).setProtectedHeader({ alg: 'EdDSA', kid: 'fuzz-k1' }).sign(k1));
w('dup_header', 1, raw('{"alg":"EdDSA","alg":"none","kid":"fuzz-k1"}', base, good1.split('.')[2]));
w('alg_none', 1, raw({ alg: 'none' }, base, ''));
w('hs256', 1, raw({ alg: 'HS256', kid: 'fuzz-k1' }, base, 'dGhpcyBpcyBub3QgYSByZWFsIG1hYyBidXQgMzIgYnk'));
const p = good1.split('.');
w('bad_sig', 1, `${p[0]}.${p[1]}.${p[2].slice(0, 40)}${p[2][40] === 'A' ? 'B' : 'A'}${p[2].slice(41)}`);
w('padding', 1, `${p[0]}==.${p[1]}.${p[2]}`);
w('four_segments', 1, `${good1}.${p[2]}`);
const jwks = JSON.stringify({ keys: [{ kty: 'OKP', crv: 'Ed25519', x: x1, kid: 'fuzz-k1' }, { kty: 'OKP', crv: 'Ed25519', x: x2, kid: 'fuzz-k2', use: 'sig', alg: 'EdDSA' }] });
w('jwks_good', 0, jwks);
w('jwks_dup_kid', 0, JSON.stringify({ keys: [{ kty: 'OKP', crv: 'Ed25519', x: x1, kid: 'a' }, { kty: 'OKP', crv: 'Ed25519', x: x2, kid: 'a' }] }));
w('jwks_ec', 0, JSON.stringify({ keys: [{ kty: 'EC', crv: 'P-256', x: x1, y: x1, kid: 'e' }] }));
w('jwks_private', 0, JSON.stringify({ keys: [{ kty: 'OKP', crv: 'Ed25519', x: x1, d: d1, kid: 'p' }] }));
w('pair_valid', 2, `${jwks}\n${good1}`);
w('pair_rotated', 2, `${JSON.stringify({ keys: [{ kty: 'OKP', crv: 'Ed25519', x: x2, kid: 'fuzz-k2' }] })}\n${good2}`);
w('b64_canonical', 3, p[0]);
w('b64_trailing_bits', 3, 'Zh');
