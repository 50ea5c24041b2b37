import { generate } from 'selfsigned';

export interface Issued {
  key: string;
  cert: string;
}

/**
 * A certificate authority made for one test run, and certificates it issues for host names:
 * MX hosts that present a valid certificate (MTA-STS enforce), the `mta-sts.<domain>` policy
 * hosts. A test trusts it by passing `caPem` where the code under test takes extra roots.
 */
export class TestCa {
  private constructor(
    readonly caPem: string,
    private readonly caKey: string,
  ) {}

  static async create(): Promise<TestCa> {
    const ca = await generate([{ name: 'commonName', value: 'svc test CA' }], {
      keyType: 'rsa',
      keySize: 2048,
      algorithm: 'sha256',
      days: 30,
      extensions: [
        { name: 'basicConstraints', cA: true, critical: true },
        { name: 'keyUsage', keyCertSign: true, cRLSign: true, digitalSignature: true, critical: true },
      ],
    } as never);
    return new TestCa(ca.cert, ca.private);
  }

  /** A leaf for these names (the first is its common name), signed by this CA. */
  async issue(hostnames: string[]): Promise<Issued> {
    const leaf = await generate([{ name: 'commonName', value: hostnames[0] }], {
      keyType: 'rsa',
      keySize: 2048,
      algorithm: 'sha256',
      days: 30,
      ca: { key: this.caKey, cert: this.caPem },
      extensions: [
        { name: 'basicConstraints', cA: false },
        { name: 'keyUsage', digitalSignature: true, keyEncipherment: true },
        { name: 'extKeyUsage', serverAuth: true },
        { name: 'subjectAltName', altNames: hostnames.map((value) => ({ type: 2, value })) },
      ],
    } as never);
    return { key: leaf.private, cert: leaf.cert };
  }

  /** A self-signed leaf no one trusts (a "bad certificate" peer). */
  static async untrusted(hostnames: string[]): Promise<Issued> {
    const leaf = await generate([{ name: 'commonName', value: hostnames[0] }], {
      keyType: 'rsa',
      keySize: 2048,
      algorithm: 'sha256',
      days: 30,
      extensions: [{ name: 'subjectAltName', altNames: hostnames.map((value) => ({ type: 2, value })) }],
    } as never);
    return { key: leaf.private, cert: leaf.cert };
  }
}
