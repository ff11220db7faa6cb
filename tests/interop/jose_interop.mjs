// Independent peer for tests/integration/jose_interop.sh: npm `jose`
// verifies airlockd's tokens and mints tokens for our verifier.
//
//   node jose_interop.mjs verify JWKS_FILE AUD TOKEN   -> "ok sub=..." (0) | "rejected: CODE: msg" (1)
//   node jose_interop.mjs mint DIR AUD SCOPE [ALG]     -> writes DIR/jwks.json, prints a token
//   node jose_interop.mjs hs256 AUD SCOPE KID          -> prints an HS256 token naming KID
//   node jose_interop.mjs none AUD SCOPE               -> prints an unsecured (alg none) token
//   node jose_interop.mjs tamper TOKEN                 -> same token, claims changed, old signature
//   node jose_interop.mjs thumbprints JWKS_FILE        -> "KID THUMBPRINT" per key (RFC 7638)
//
// Exit 2 on misuse. Time is the real clock, as airlockd's.
import { readFileSync, writeFileSync, mkdirSync } from 'node:fs';
import {
  createLocalJWKSet, jwtVerify, generateKeyPair, exportJWK, calculateJwkThumbprint,
  SignJWT, UnsecuredJWT, base64url,
} from 'jose';

const [cmd, ...args] = process.argv.slice(2);

function usage() {
  console.error('usage: jose_interop.mjs verify|mint|hs256|none|tamper|thumbprints ...');
  process.exit(2);
}

async function verify(jwksFile, aud, token) {
  const jwks = createLocalJWKSet(JSON.parse(readFileSync(jwksFile, 'utf8')));
  try {
    const { payload, protectedHeader } = await jwtVerify(token, jwks, {
      audience: aud,
      algorithms: ['EdDSA'],
      requiredClaims: ['exp', 'sub', 'scope'],
    });
    console.log(`ok sub=${payload.sub} scope=${payload.scope} kid=${protectedHeader.kid} ` +
                `typ=${protectedHeader.typ} iss=${payload.iss} jti=${payload.jti}`);
    return 0;
  } catch (e) {
    console.log(`rejected: ${e.code ?? e.name}: ${e.message}`);
    return 1;
  }
}

async function mint(dir, aud, scope, alg = 'EdDSA') {
  const { publicKey, privateKey } = await generateKeyPair('EdDSA', { extractable: true });
  const jwk = await exportJWK(publicKey);
  jwk.kid = await calculateJwkThumbprint(jwk);
  jwk.use = 'sig';
  mkdirSync(dir, { recursive: true });
  writeFileSync(`${dir}/jwks.json`, JSON.stringify({ keys: [jwk] }, null, 2) + '\n');
  const token = await new SignJWT({ scope })
    .setProtectedHeader({ alg, kid: jwk.kid, typ: 'JWT' })
    .setIssuer('jose-test')
    .setSubject('jose-user')
    .setAudience(aud)
    .setIssuedAt()
    .setNotBefore('0s')
    .setExpirationTime('5m')
    .setJti(base64url.encode(crypto.getRandomValues(new Uint8Array(16))))
    .sign(privateKey);
  console.log(token);
  return 0;
}

async function hs256(aud, scope, kid) {
  const secret = crypto.getRandomValues(new Uint8Array(32));
  const token = await new SignJWT({ scope })
    .setProtectedHeader({ alg: 'HS256', kid, typ: 'JWT' })
    .setSubject('hmac-user')
    .setAudience(aud)
    .setIssuedAt()
    .setExpirationTime('5m')
    .sign(secret);
  console.log(token);
  return 0;
}

function none(aud, scope) {
  const token = new UnsecuredJWT({ scope })
    .setSubject('nobody')
    .setAudience(aud)
    .setIssuedAt()
    .setExpirationTime('5m')
    .encode();
  console.log(token);
  return 0;
}

function tamper(token) {
  const [h, c, s] = token.split('.');
  if (s === undefined) usage();
  const claims = JSON.parse(new TextDecoder().decode(base64url.decode(c)));
  claims.sub = 'mallory';
  claims.scope = `${claims.scope} terminal:write`;
  const c2 = base64url.encode(JSON.stringify(claims));
  console.log(`${h}.${c2}.${s}`);
  return 0;
}

async function thumbprints(jwksFile) {
  const { keys } = JSON.parse(readFileSync(jwksFile, 'utf8'));
  for (const k of keys) console.log(`${k.kid} ${await calculateJwkThumbprint(k)}`);
  return 0;
}

let rc;
switch (cmd) {
  case 'verify': if (args.length !== 3) usage(); rc = await verify(...args); break;
  case 'mint': if (args.length < 3 || args.length > 4) usage(); rc = await mint(...args); break;
  case 'hs256': if (args.length !== 3) usage(); rc = await hs256(...args); break;
  case 'none': if (args.length !== 2) usage(); rc = none(...args); break;
  case 'tamper': if (args.length !== 1) usage(); rc = tamper(...args); break;
  case 'thumbprints': if (args.length !== 1) usage(); rc = await thumbprints(...args); break;
  default: usage();
}
process.exit(rc);
