// What a sandbox host answers to a leak scan is untrusted: anything but the
// exact shape for this check is an error, never a pass.
import { describe, expect, it } from 'vitest';
import { needlesFor } from '../../../main/credentials/leak-needles.js';
import { parseScanAnswer, scanSpec } from '../../../main/remote/remote-leak.js';

const spec = scanSpec(needlesFor('k', 'sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789'));
const N = spec.nonce;
const ok = [`fiab-leakscan 1 ${N}`, 'source memory bytes 100 runs 3 ok', 'hit memory 0 42', 'count memory 0 1', 'source disk bytes 5 runs 0 ok', 'windows 7', `end ${N}`];
const parse = (lines: string[]) => parseScanAnswer(lines.join('\n') + '\n', spec, ['memory', 'disk']);

describe('the answer of a remote leak scan', () => {
  it('reads a well-formed answer: hits named by credential and encoding, never by value', () => {
    const r = parse(ok);
    expect(r.get('memory')).toEqual({ bytes: 100, hits: [{ credentialId: 'k', encoding: 'raw', offset: 42 }] });
    expect(r.get('disk')).toEqual({ bytes: 5, hits: [] });
  });

  const hostile: Array<[string, string[]]> = [
    ['an empty answer', []],
    ['another check\'s nonce', ok.map((l) => l.replace(N, '0'.repeat(32)))],
    ['no end (cut off)', ok.slice(0, -1)],
    ['a source left out', ok.filter((l) => !l.startsWith('source disk'))],
    ['a source twice', [...ok.slice(0, 2), ok[1]!, ...ok.slice(2)]],
    ['a source not asked for', [...ok.slice(0, -1), 'source etc bytes 1 runs 0 ok', ok.at(-1)!]],
    ['a needle not asked for', ok.map((l) => l.replace('hit memory 0 42', 'hit memory 999 42').replace('count memory 0 1', 'count memory 999 1'))],
    ['a hit without its count', ok.filter((l) => !l.startsWith('count'))],
    ['a count below its hits', ok.map((l) => (l.startsWith('count') ? 'count memory 0 0' : l))],
    ['a hit before its source', [ok[0]!, 'hit disk 0 1', 'count disk 0 1', ...ok.slice(1)]],
    ['a negative or huge number', ok.map((l) => l.replace('bytes 100', 'bytes 99999999999999999999'))],
    ['a control character', ok.map((l) => l.replace('runs 3 ok', 'runs 3 ok\r'))],
    ['an unknown line', [...ok.slice(0, -1), 'clean', ok.at(-1)!]],
    ['no window count', ok.filter((l) => !l.startsWith('windows'))],
    ['more hits than the cap', [ok[0]!, 'source memory bytes 1 runs 1 ok', ...Array.from({ length: 21 }, (_, i) => `hit memory 0 ${i}`), 'count memory 0 21', ...ok.slice(4)]],
    ['a flood of lines', [ok[0]!, ...Array.from({ length: 30_000 }, () => 'windows 1'), ok.at(-1)!]],
  ];
  for (const [what, lines] of hostile) {
    it(`refuses ${what}`, () => {
      expect(() => parse(lines)).toThrow(/malformed/);
    });
  }
});
