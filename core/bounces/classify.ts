import { findReport, splitEntity, type FieldBlock } from './report';

/** What a message returned to a bounce address means for the recipient it was addressed about. */
export type ReturnOutcome =
  | { kind: 'bounced'; bounceType: 'hard' | 'undetermined'; detail: string; recipient: string | null }
  | { kind: 'delivery_delayed'; detail: string; recipient: string | null }
  | { kind: 'complained'; detail: string; recipient: string | null }
  /** Neither a report nor readable: an auto-reply is ignored; anything else to a VERP address is an undetermined bounce. */
  | { kind: 'auto_reply' }
  | { kind: 'unreadable' }
  /** A DSN saying every recipient was delivered, relayed or expanded: no failure, nothing to record. */
  | { kind: 'success_report' };

/**
 * Reads a message that came back to a bounce address (issue 14):
 * - a report part is read first (real DSNs often say `Auto-Submitted: auto-replied` as well);
 * - an RFC 3464 DSN: the first recipient block whose Status is 5.x.x is a hard bounce, else one of
 *   4.x.x is a delay; `detail` is the status and the diagnostic (`5.1.1 smtp; 550 ... unknown`);
 * - an RFC 5965 feedback report is a complaint, `detail` the feedback type (`abuse`);
 * - without a report, an auto-reply (`Auto-Submitted` other than `no`, `X-Autoreply`,
 *   `X-Autorespond`, `Precedence: auto_reply`, a vacation or out-of-office subject) is ignored;
 * - anything else is unreadable (the caller records an undetermined bounce for a VERP address).
 * Pass mailparser's decoded subject as `subject` so an encoded one is read too.
 * A DSN whose recipients are all delivered, relayed or expanded (`2.x.x`) is a success report:
 * it says nothing about a failure, and the caller records nothing.
 */
export function classifyReturn(raw: Buffer | string, opts: { subject?: string } = {}): ReturnOutcome {
  const report = findReport(raw);
  if (report?.type === 'delivery-status') {
    // Per-recipient blocks; the per-message block (Reporting-MTA, Arrival-Date) has neither field.
    const recipients = report.blocks.filter((b) => b.has('final-recipient') || b.has('action'));
    const hard = recipients.find((b) => /^5\./.test(status(b)));
    if (hard) return { kind: 'bounced', bounceType: 'hard', detail: detail(hard), recipient: address(hard.get('final-recipient')) };
    const soft = recipients.find((b) => /^4\./.test(status(b)));
    if (soft) return { kind: 'delivery_delayed', detail: detail(soft), recipient: address(soft.get('final-recipient')) };
    const fine = (b: FieldBlock) => /^2\./.test(status(b)) || /^(delivered|relayed|expanded)$/i.test((b.get('action') ?? '').trim());
    if (recipients.length > 0 && recipients.every(fine)) return { kind: 'success_report' };
    return { kind: 'unreadable' };
  }
  if (report?.type === 'feedback-report') {
    const fields = report.blocks[0] ?? new Map<string, string>();
    return {
      kind: 'complained',
      detail: (fields.get('feedback-type') ?? 'abuse').toLowerCase(),
      recipient: address(fields.get('original-rcpt-to')),
    };
  }
  const { headers } = splitEntity(typeof raw === 'string' ? raw : raw.toString('latin1'));
  return isAutoReply(headers, opts.subject ?? headers.get('subject') ?? '') ? { kind: 'auto_reply' } : { kind: 'unreadable' };
}

const status = (b: FieldBlock) => (b.get('status') ?? '').trim();

function detail(b: FieldBlock): string {
  const diagnostic = b.get('diagnostic-code');
  return (diagnostic ? `${status(b)} ${diagnostic}` : status(b)).slice(0, 1000);
}

/** `rfc822; ann@example.org` (or a bare address) → `ann@example.org`, lower-cased. */
function address(field: string | undefined): string | null {
  if (!field) return null;
  const value = field.includes(';') ? field.slice(field.indexOf(';') + 1) : field;
  const bare = value.trim().replace(/^<(.*)>$/, '$1');
  return bare.includes('@') ? bare.toLowerCase() : null;
}

/** `subject` decoded (mailparser's), so an encoded "Out of Office" is seen too. */
function isAutoReply(h: Map<string, string>, subject: string): boolean {
  const auto = h.get('auto-submitted');
  if (auto !== undefined && auto.trim().toLowerCase() !== 'no') return true;
  if (h.has('x-autoreply') || h.has('x-autorespond')) return true;
  if (/^auto[_-]reply$/i.test((h.get('precedence') ?? '').trim())) return true;
  return /\b(out of (the )?office|vacation|auto(matic)?[ -]?reply|abwesenheit|absence)\b/i.test(subject);
}
