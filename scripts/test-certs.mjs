// Makes the throwaway certificate authority and the receiver certificate the delivery tests use
// (`receiver.test`, served on loopback), also valid for `localhost` so that `svc listen --forward-to
// https://localhost:8443/hook` reaches the example receiver (docs/integrators.md). No IP names: the
// sender's tests rely on an IP-literal URL failing the certificate. Kept in .test-certs/ and reused
// while valid and naming all of these.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const dir = join(process.cwd(), '.test-certs');
const files = ['ca.pem', 'ca.key', 'receiver.pem', 'receiver.key'].map((f) => join(dir, f));
const fresh = () => {
  try {
    execFileSync('openssl', ['x509', '-checkend', '86400', '-noout', '-in', join(dir, 'receiver.pem')], { stdio: 'ignore' });
    const names = execFileSync('openssl', ['x509', '-noout', '-ext', 'subjectAltName', '-in', join(dir, 'receiver.pem')], { encoding: 'utf8' });
    return names.includes('DNS:localhost');
  } catch {
    return false;
  }
};
if (files.every(existsSync) && fresh()) process.exit(0);

mkdirSync(dir, { recursive: true });
const run = (...args) => execFileSync('openssl', args, { stdio: 'pipe' });
run('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '30', '-subj', '/CN=SVC test CA',
  '-keyout', join(dir, 'ca.key'), '-out', join(dir, 'ca.pem'),
  '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign');
run('req', '-newkey', 'rsa:2048', '-nodes', '-subj', '/CN=receiver.test',
  '-keyout', join(dir, 'receiver.key'), '-out', join(dir, 'receiver.csr'));
writeFileSync(join(dir, 'receiver.ext'),
  'subjectAltName=DNS:receiver.test,DNS:other.test,DNS:private.test,DNS:localhost\nextendedKeyUsage=serverAuth\n');
run('x509', '-req', '-in', join(dir, 'receiver.csr'), '-CA', join(dir, 'ca.pem'), '-CAkey', join(dir, 'ca.key'),
  '-CAcreateserial', '-days', '30', '-out', join(dir, 'receiver.pem'), '-extfile', join(dir, 'receiver.ext'));
console.log('test certificates written to .test-certs/');
