/** RFC 5322 §2.1.1: a line is at most 998 octets, header lines included. */
const MAX_LINE = 998;
/** Bytes of text per encoded-word: 60 characters of base64, 72 with its delimiters. */
const WORD_BYTES = 45;

/**
 * A header value that will fit RFC 5322's line limit once folded. Folding happens only at
 * whitespace, so a value with a run of non-space characters too long for one line (the spec allows
 * values of 1,000 characters, and subjects of 998) is written as RFC 2047 encoded-words instead:
 * receivers decode them to the same text, and the folder can break between them. Anything else
 * is returned as it is, for nodemailer to fold (and to encode when it is not ASCII).
 */
export function foldableHeaderValue(name: string, value: string): string {
  let longest = 0;
  for (const run of value.split(/[ \t]+/)) longest = Math.max(longest, Buffer.byteLength(run));
  // The first run shares its line with `Name: `; later ones start a continuation line with a space.
  if (longest + name.length + 2 <= MAX_LINE) return value;
  const words: string[] = [];
  let chunk = '';
  for (const ch of value) {
    if (Buffer.byteLength(chunk + ch) > WORD_BYTES) {
      words.push(chunk);
      chunk = '';
    }
    chunk += ch;
  }
  if (chunk) words.push(chunk);
  return words.map((w) => `=?UTF-8?B?${Buffer.from(w).toString('base64')}?=`).join(' ');
}
