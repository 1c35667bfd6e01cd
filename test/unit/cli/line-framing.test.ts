// The socket's framing: lines split across chunks, several lines per chunk, and a
// line over the cap reported once without holding its bytes.
import { describe, expect, it } from 'vitest';
import { LineReader, encodeLine } from '../../../main/instance/line-framing.js';

function reader(cap = 64) {
  const lines: string[] = [];
  const errors: string[] = [];
  const r = new LineReader((l) => lines.push(l), (e) => errors.push(e.message), cap);
  return { r, lines, errors };
}

describe('socket line framing', () => {
  it('joins a message split across chunks, even inside a multi-byte character', () => {
    const { r, lines } = reader();
    const bytes = Buffer.from('{"a":"é€"}\n');
    for (const b of bytes) r.push(Buffer.from([b]));
    expect(lines).toEqual(['{"a":"é€"}']);
  });

  it('splits several messages in one chunk and skips blank lines', () => {
    const { r, lines } = reader();
    r.push(Buffer.from('1\n\n2\n  \n3'));
    r.push(Buffer.from('\n'));
    expect(lines).toEqual(['1', '2', '3']);
  });

  it('reports a line over the cap once and ignores everything after it', () => {
    const { r, lines, errors } = reader(16);
    r.push(Buffer.from('ok\n' + 'x'.repeat(10)));
    r.push(Buffer.from('x'.repeat(10)));
    r.push(Buffer.from('x\nlater\n'));
    expect(lines).toEqual(['ok']);
    expect(errors).toEqual(['a message line is longer than 16 bytes']);
  });

  it('accepts a line of exactly the cap', () => {
    const { r, lines, errors } = reader(8);
    r.push(Buffer.from('12345678\n'));
    expect(errors).toEqual([]);
    expect(lines).toEqual(['12345678']);
  });

  it('encodes a message with newlines in its strings as one line', () => {
    const line = encodeLine({ text: 'a\nb\r\n' });
    expect(line.indexOf('\n')).toBe(line.length - 1);
    expect(JSON.parse(line)).toEqual({ text: 'a\nb\r\n' });
  });
});
