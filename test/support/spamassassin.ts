import { execFile, execFileSync } from 'node:child_process';

/** What SpamAssassin made of one message: its score and every rule that hit, with the rule's points. */
export interface SpamReport {
  score: number;
  rules: Map<string, number>;
}

/** Debian's spamassassin (tools/install.sh installs it), or null with the reason it cannot run. */
export function spamassassinMissing(): string | null {
  try {
    execFileSync('spamassassin', ['--version'], { stdio: 'pipe' });
    return null;
  } catch {
    return 'Debian’s spamassassin is not installed (npm run tools installs it)';
  }
}

/**
 * Scores `raw` as a receiving system's SpamAssassin would with its local rules only (`-L`: no
 * DNS blocklists, no network checks; DKIM is judged apart, by mailauth against the test DNS).
 * Bayes is off, so earlier runs cannot teach it anything; no preferences file is written.
 */
export function spamassassin(raw: Buffer): Promise<SpamReport> {
  const args = [
    '-L',
    '-x',
    '-t',
    '--cf=use_bayes 0',
    '--cf=report_safe 0',
    // Every rule with its points in one header, whatever its score (`tests=` lists names only).
    '--cf=add_header all Rules _TESTSSCORES(,)_',
  ];
  return new Promise((resolve, reject) => {
    const child = execFile('spamassassin', args, { maxBuffer: 64 * 1024 * 1024, encoding: 'buffer' }, (err, stdout, stderr) => {
      if (err) return reject(new Error(`spamassassin failed: ${err.message}: ${stderr.toString()}`));
      const out = stdout.toString('latin1');
      const head = out.slice(0, out.search(/\r?\n\r?\n/)).replace(/\r?\n[ \t]+/g, ' ');
      const status = /^X-Spam-Status: .*?score=(-?[\d.]+)/m.exec(head);
      const rules = /^X-Spam-Rules: (.*)$/m.exec(head);
      if (!status || !rules) return reject(new Error(`no SpamAssassin verdict in its output:\n${out.slice(0, 2000)}`));
      const map = new Map<string, number>();
      for (const pair of rules[1].split(',')) {
        const [name, points] = pair.trim().split('=');
        if (name && name !== 'none') map.set(name, Number(points));
      }
      resolve({ score: Number(status[1]), rules: map });
    });
    child.stdin!.end(raw);
  });
}
