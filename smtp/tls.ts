import fs from 'node:fs';
import path from 'node:path';
import { generate } from 'selfsigned';

export interface TlsPair {
  key: Buffer;
  cert: Buffer;
  /** Generated here for development (clients must trust it explicitly or skip verification). */
  selfSigned: boolean;
}

export interface TlsSource {
  certFile: string | null;
  keyFile: string | null;
  dataDir: string;
}

/**
 * The relay's certificate: the configured PEM files, or in development a self-signed pair made
 * once into DATA_DIR/smtp-relay-tls and reused, so a client that pinned it keeps working across
 * restarts. Production never gets a generated one (server/service.ts refuses to start without files).
 */
export async function relayTls(src: TlsSource): Promise<TlsPair> {
  if (src.certFile && src.keyFile) {
    return { cert: fs.readFileSync(src.certFile), key: fs.readFileSync(src.keyFile), selfSigned: false };
  }
  const dir = path.join(src.dataDir, 'smtp-relay-tls');
  const certPath = path.join(dir, 'cert.pem');
  const keyPath = path.join(dir, 'key.pem');
  if (fs.existsSync(certPath) && fs.existsSync(keyPath)) {
    return { cert: fs.readFileSync(certPath), key: fs.readFileSync(keyPath), selfSigned: true };
  }
  const pems = await generate([{ name: 'commonName', value: 'localhost' }], {
    keySize: 2048,
    algorithm: 'sha256',
    notAfterDate: new Date(Date.now() + 10 * 365 * 24 * 3600 * 1000),
    extensions: [
      {
        name: 'subjectAltName',
        altNames: [
          { type: 2, value: 'localhost' },
          { type: 7, ip: '127.0.0.1' },
        ],
      },
    ],
  });
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  // Key first, then the certificate by rename: a crash in between leaves no half pair that looks whole.
  fs.writeFileSync(keyPath, pems.private, { mode: 0o600 });
  fs.writeFileSync(`${certPath}.tmp`, pems.cert);
  fs.renameSync(`${certPath}.tmp`, certPath);
  return { cert: Buffer.from(pems.cert), key: Buffer.from(pems.private), selfSigned: true };
}
