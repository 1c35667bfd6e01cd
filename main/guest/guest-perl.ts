// The perl the host runs in a guest (the identity waiter, the re-key) and on a
// sandbox host (the leak scan) lives in vm-images/perl/ as files of its own, so
// it reads as perl and `perl -c` checks it (test/unit/guest/guest-perl.test.ts).
// A program sent as `perl -e '...'` is put together here: a `#include <file>`
// line stands for that file's lines (each indented as the include line is),
// other comment lines and blank lines go, {{NAME}} is filled from the host's
// constants, and the lines are joined by one space. The result is what the
// guest runs, byte for byte: the snapshot template keeps the waiter in its
// memory, so a change of it is a change of TEMPLATE_VERSION (vm/warm-state.ts).
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** vm-images/perl/, found by walking up from this module (works from the sources and from dist/). */
export function perlDir(from = path.dirname(fileURLToPath(import.meta.url))): string {
  for (let dir = from; ; ) {
    const candidate = path.join(dir, 'vm-images', 'perl');
    if (existsSync(path.join(candidate, 'rekey.pl'))) return candidate;
    const parent = path.dirname(dir);
    if (parent === dir) throw new Error(`the guest's perl scripts are missing: no vm-images/perl/ above ${from}`);
    dir = parent;
  }
}

const files = new Map<string, string>();

/** A file of vm-images/perl/ as it is (a script uploaded whole, e.g. the remote leak scan). */
export function perlFile(name: string): string {
  if (!/^[a-z0-9-]+\.pl$/.test(name)) throw new Error(`"${name}" is not the name of a perl script of vm-images/perl/`);
  let text = files.get(name);
  if (text === undefined) {
    text = readFileSync(path.join(perlDir(), name), 'utf8');
    files.set(name, text);
  }
  return text;
}

const INCLUDE = /^(\s*)#include (\S+)\s*$/;
const PLACEHOLDER = /\{\{([A-Z0-9_]+)\}\}/g;

/**
 * The program of `name` as one line for `perl -e '...'`, its {{NAME}}s filled from `values`. Throws on a
 * placeholder without a value, a value no placeholder uses, an include cycle and a single quote (it would
 * end the shell's quoting).
 */
export function perlOneLine(name: string, values: Readonly<Record<string, string | number>>): string {
  const used = new Set<string>();
  const text = programLines(name, '', []).join(' ').replace(PLACEHOLDER, (_, key: string) => {
    if (!Object.hasOwn(values, key)) throw new Error(`vm-images/perl/${name}: no value for {{${key}}}`);
    used.add(key);
    return String(values[key]);
  });
  const unused = Object.keys(values).filter((key) => !used.has(key));
  if (unused.length) throw new Error(`vm-images/perl/${name} has no {{${unused.join('}}, {{')}}}`);
  if (text.includes("'")) throw new Error(`vm-images/perl/${name} has a single quote: it cannot run as perl -e '...'`);
  return text;
}

function programLines(name: string, indent: string, including: string[]): string[] {
  if (including.includes(name)) throw new Error(`vm-images/perl/${name} includes itself (${[...including, name].join(' → ')})`);
  const lines: string[] = [];
  for (const line of perlFile(name).split('\n')) {
    const include = INCLUDE.exec(line);
    if (include) lines.push(...programLines(include[2]!, indent + include[1]!, [...including, name]));
    else if (line.trim() !== '' && !line.trimStart().startsWith('#')) lines.push(indent + line);
  }
  return lines;
}
