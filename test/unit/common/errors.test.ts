// The registry of error names against the sources: a name raised anywhere in
// main/, common/, renderer/ or preload/ that the registry does not know would reach
// the user as a bare internal word; a registry entry nothing raises is dead text.
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ERRORS, errorHelp, isErrorName } from '../../../common/errors.js';
import { fromWireError, toWireError } from '../../../common/contract.js';
import { FactoryError } from '../../../common/errors.js';

const ROOT = path.resolve(import.meta.dirname, '../../..');
const SOURCE_DIRS = ['main', 'common', 'renderer', 'preload'];

function sourceFiles(dir: string): string[] {
  const out: string[] = [];
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) out.push(...sourceFiles(full));
    else if (/\.tsx?$/.test(entry.name)) out.push(full);
  }
  return out;
}

// Every way the sources give an error its name.
const NAME_PATTERNS = [
  /new FactoryError\(\s*'([A-Za-z]+)'/g,
  /super\(\s*'([A-Z][A-Za-z]+)'/g,
  /errorName(?:\s*:|\s*\?\?)\s*'([A-Za-z]+)'/g,
  /\bname:\s*'([A-Z][A-Za-z]+)'/g,
  /\.name\s*={1,3}\s*'([A-Z][A-Za-z]+)'/g,
  /name\s*\?\?\s*'([A-Z][A-Za-z]+)'/g,
];

function namesUsed(): Map<string, string[]> {
  const used = new Map<string, string[]>();
  for (const dir of SOURCE_DIRS) {
    for (const file of sourceFiles(path.join(ROOT, dir))) {
      if (file.endsWith(path.join('common', 'errors.ts'))) continue;
      const text = fs.readFileSync(file, 'utf8');
      for (const re of NAME_PATTERNS) {
        for (const m of text.matchAll(re)) {
          const where = used.get(m[1]!) ?? [];
          where.push(path.relative(ROOT, file));
          used.set(m[1]!, where);
        }
      }
    }
  }
  return used;
}

describe('the error registry', () => {
  const used = namesUsed();

  it('knows every error name the sources raise', () => {
    // The scan itself must see names from each way of naming, or it proves nothing.
    for (const seen of ['QemuMissing', 'HostKeyMismatch', 'StageFailed', 'PullbackRejected', 'Interrupted', 'QmpError', 'Disconnected', 'ApproveFailed']) {
      expect(used.has(seen), `the scan found no use of ${seen}`).toBe(true);
    }
    expect(used.size).toBeGreaterThan(45);
    const unknown = [...used.entries()].filter(([name]) => !isErrorName(name)).map(([name, files]) => `${name} (${[...new Set(files)].join(', ')})`);
    expect(unknown).toEqual([]);
  });

  it('has one name for "QEMU is missing"', () => {
    expect(used.has('QemuNotInstalled')).toBe(false);
    expect(isErrorName('QemuNotInstalled')).toBe(false);
    expect(Object.values(ERRORS).filter((e) => /qemu/i.test(e.title) && /install/i.test(e.title))).toHaveLength(1);
  });

  it('has no entry that nothing raises', () => {
    const unused = Object.keys(ERRORS).filter((name) => !used.has(name));
    expect(unused).toEqual([]);
  });

  it('gives every name a short title and a help text, each its own', () => {
    const titles = new Set<string>();
    for (const [name, { title, help }] of Object.entries(ERRORS)) {
      expect(title.trim().length, name).toBeGreaterThan(3);
      expect(title.length, name).toBeLessThanOrEqual(50);
      expect(title, `${name}: the title is the internal name`).not.toBe(name);
      expect(help.length, name).toBeGreaterThan(20);
      expect(help, name).toMatch(/[.!]$/);
      expect(titles.has(title), `${name}: title "${title}" is used twice`).toBe(false);
      titles.add(title);
    }
  });

  it('gives a name it does not know (an older host, a hostile wire) the generic text, never undefined', () => {
    for (const odd of ['NotARealName', '__proto__', 'constructor', 'toString', '']) {
      expect(isErrorName(odd)).toBe(false);
      expect(errorHelp(odd)).toBe(ERRORS.Error);
    }
  });

  it('carries a foreign name across the wire unchanged', () => {
    const back = fromWireError(toWireError(FactoryError.carried('SomethingNewer', 'from a newer host', 'd')));
    expect(back).toBeInstanceOf(FactoryError);
    expect([back.name, back.message, back.detail]).toEqual(['SomethingNewer', 'from a newer host', 'd']);
  });
});
