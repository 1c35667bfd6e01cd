// Quoting words for a POSIX shell: the one way every process builds a shell
// line (guest commands over SSH, the guest's env file, QEMU's exec: URIs, the
// image build). Pure TypeScript: no Node, no DOM.

/** POSIX single-quote: safe for any string without NUL. */
export function shellQuote(word: string): string {
  if (word.includes('\0')) throw new Error('a shell word cannot contain a NUL byte');
  return `'${word.replace(/'/g, `'\\''`)}'`;
}

/** A word as it reads best: bare when it holds only characters no shell treats specially, else quoted. */
export function shellWord(word: string): string {
  if (word.includes('\0')) throw new Error('a shell word cannot contain a NUL byte');
  return /^[A-Za-z0-9_@%+=:,./-]+$/.test(word) ? word : shellQuote(word);
}
