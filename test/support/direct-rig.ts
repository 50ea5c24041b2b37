import { Resolver } from 'node:dns/promises';
import { createDirectMailer, type DirectOptions } from '../../activities/delivery/direct-mailer';
import type { Mailer } from '../../activities/mailer';
import { systemClock } from '../../core/clock';
import { freePort } from './child';
import { TestDns } from './dns';
import { ConnectionCounter, FakePolicies, MxPeer, type PeerTls, shapingWith, silentLog } from './mx-peer';

/**
 * What every direct-mailer test stands on: a DNS server on loopback the mailer resolves through,
 * one port every MX peer of the test listens on (each on its own 127.0.0.x), and the mailer as the
 * delivery pass builds it, with test defaults. `reset` after each test closes what it opened.
 */
export class DirectRig {
  readonly dns = new TestDns();
  readonly resolver = new Resolver({ timeout: 2000, tries: 1 });
  port = 0;
  peers: MxPeer[] = [];
  mailer: Mailer | null = null;

  async start(): Promise<void> {
    this.resolver.setServers([await this.dns.start()]);
    this.port = await freePort();
  }

  stop(): Promise<void> {
    return this.dns.stop();
  }

  async reset(): Promise<void> {
    this.mailer?.close();
    this.mailer = null;
    await Promise.all(this.peers.map((p) => p.stop()));
    this.peers = [];
    for (const m of [this.dns.mx, this.dns.a, this.dns.aaaa, this.dns.txt]) m.clear();
    this.dns.nxdomain.clear();
    this.dns.servfail.clear();
  }

  async peer(address: string, script: MxPeer['script'] = {}, tls: PeerTls = 'none', counter?: ConnectionCounter): Promise<MxPeer> {
    const p = new MxPeer(address, script, tls, counter);
    await p.start(this.port);
    this.peers.push(p);
    return p;
  }

  direct(o: Partial<DirectOptions> = {}): Mailer {
    this.mailer = createDirectMailer({
      dns: this.resolver,
      port: this.port,
      allowPrivateMx: true,
      heloName: 'mta.sender.test',
      sourceIps: [],
      shaping: shapingWith(),
      policies: new FakePolicies(),
      clock: systemClock,
      log: silentLog,
      ...o,
    });
    return this.mailer;
  }
}
