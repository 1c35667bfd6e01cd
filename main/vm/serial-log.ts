// The sandbox's serial console log: one file across boots, each boot after a
// marker line, read back (for error messages) as plain text from the marker on.
import { appendFile, chmod, stat } from 'node:fs/promises';
import { plainText } from '../guest/guest-shell.js';
import { readFileTail } from '../state/file-tail.js';

/** Appends a marker line to the serial log and returns the offset the new boot starts at. */
export async function appendMarker(file: string, text: string): Promise<number> {
  await appendFile(file, `\n=== factory: ${text} ===\n`);
  // Best effort: the folder is already 0700; the mode only narrows it further.
  await chmod(file, 0o600).catch(() => {});
  return (await stat(file)).size;
}

/** Last lines of a log written by the guest, from an offset, with escapes and control characters removed. */
export function readTail(file: string, fromOffset: number, lines: number, maxBytes = 64 * 1024): string {
  const text = plainText(readFileTail(file, maxBytes, fromOffset).toString('utf8'));
  return text.split('\n').filter((l) => l.trim()).slice(-lines).join('\n');
}
