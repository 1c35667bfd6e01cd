// `factory hooks install|uninstall`: our entries in Claude Code's settings.json
// (project: <repo>/.claude/settings.json; user: ~/.claude/settings.json) or, with
// `--agent codex`, in Codex's hooks.json (project: <repo>/.codex/hooks.json;
// user: $CODEX_HOME/hooks.json, ~/.codex by default), both in the same format: {"hooks": {"<Event>": [{"hooks": [{"type":
// "command", "command": "...", "timeout": s}]}]}}. Each command we add ends with
// a shell comment (MARK) so uninstall removes exactly what install added and
// nothing the user wrote. A file that is not valid JSON, or whose hooks are not
// in that shape, is refused and never rewritten.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { FactoryError } from '../../../common/contract.js';
import { shellWord } from '../../../common/shell-quote.js';
import type { InteractiveAgent } from '../../../common/agent-session.js';
import { CODEX_HOOK_EVENTS, HOOK_EVENTS, hookEvents, type HookEvent } from './hook-events.js';

/** The comment that marks a command as ours (a shell comment: Claude Code runs hook commands through a shell). */
export const MARK = '# added by factory hooks install';

export type Scope = 'project' | 'user';

export function settingsPath(scope: Scope, cwd: string, home = process.env.HOME || os.homedir(), agent: InteractiveAgent = 'claude', env: NodeJS.ProcessEnv = process.env): string {
  if (agent === 'codex') return scope === 'user' ? path.join(env.CODEX_HOME || path.join(home, '.codex'), 'hooks.json') : path.join(cwd, '.codex', 'hooks.json');
  return scope === 'user' ? path.join(home, '.claude', 'settings.json') : path.join(cwd, '.claude', 'settings.json');
}

/**
 * Noted on our SessionStart command when install, not the user, turned
 * disableSkillShellExecution on: uninstall turns it off only then.
 */
export const FLAG_NOTE = '# set disableSkillShellExecution';

export function hookCommand(prefix: string, event: HookEvent, agent: InteractiveAgent = 'claude', setFlag = false): string {
  if (agent === 'codex') {
    // Codex lets a call run when its PreToolUse hook fails, and also on status 2 without a reason on stderr: every failure becomes 2 with one.
    if (event === 'PreToolUse') return `${prefix} hook pre-tool-use --agent codex --via ${shellWord(prefix)} || { echo 'factory: the PreToolUse hook failed, so the call is blocked' >&2; exit 2; } ${MARK}`;
    return `${prefix} hook ${CODEX_HOOK_EVENTS[event].sub} --agent codex ${MARK}`;
  }
  // A PreToolUse hook that exits with any status but 0 or 2 would let the call run (a mere warning): every failure becomes 2.
  if (event === 'PreToolUse') return `${prefix} hook pre-tool-use --via ${shellWord(prefix)} || exit 2 ${MARK}`;
  return `${prefix} hook ${HOOK_EVENTS[event].sub} ${setFlag && event === 'SessionStart' ? `${FLAG_NOTE} ` : ''}${MARK}`;
}

/** Whether our SessionStart command, where install writes it, carries FLAG_NOTE (the shape checked by checkShape). */
function flagNoted(settings: Json): boolean {
  const groups = isObject(settings.hooks) ? settings.hooks.SessionStart : undefined;
  if (!Array.isArray(groups)) return false;
  return groups.some((g: Json) => (g.hooks as Json[]).some((h) => isOurCommand(h.command) && (h.command as string).includes(FLAG_NOTE)));
}

export function isOurCommand(command: unknown): boolean {
  return typeof command === 'string' && command.trimEnd().endsWith(MARK);
}

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Checks the part of the settings we touch; names the first thing out of shape. */
function checkShape(settings: unknown, file: string): asserts settings is Json {
  const bad = (what: string) => new FactoryError('HookSettingsInvalid', `${file}: ${what}; it was left as it is`);
  if (!isObject(settings)) throw bad('the file is not a JSON object');
  if (settings.hooks === undefined) return;
  if (!isObject(settings.hooks)) throw bad('"hooks" is not an object');
  for (const event of Object.keys(HOOK_EVENTS)) {
    const groups = settings.hooks[event];
    if (groups === undefined) continue;
    if (!Array.isArray(groups)) throw bad(`"hooks.${event}" is not an array`);
    groups.forEach((g, i) => {
      if (!isObject(g) || !Array.isArray(g.hooks)) throw bad(`"hooks.${event}[${i}]" is not an object with a "hooks" array`);
    });
  }
}

/** Adds (or updates) our entries; everything else stays as it was. Pure. */
export function mergeHooks(settings: Json, prefix: string, agent: InteractiveAgent = 'claude'): { settings: Json; changed: boolean } {
  const out = structuredClone(settings);
  // Claude Code runs the `!` lines of slash commands and skills on this computer with no tool
  // call for the PreToolUse hook to route: on while the hooks are installed. Ours when it was
  // off before, or when an earlier install of ours turned it on.
  const setFlag = agent === 'claude' && (out.disableSkillShellExecution !== true || flagNoted(out));
  const hooks = (out.hooks ??= {}) as Record<string, Json[]>;
  let changed = false;
  const events = hookEvents(agent);
  for (const [event, { timeout, matcher }] of Object.entries(events) as Array<[HookEvent, (typeof events)[HookEvent]]>) {
    const want = { type: 'command', command: hookCommand(prefix, event, agent, setFlag), timeout };
    const groups = (hooks[event] ??= []);
    const ourGroups = groups.filter((g) => (g.hooks as Json[]).some((h) => isOurCommand(h.command)));
    const ours = ourGroups.flatMap((g) => (g.hooks as Json[]).filter((h) => isOurCommand(h.command)));
    if (ours.length === 1 && JSON.stringify(ours[0]) === JSON.stringify(want) && ourGroups[0]!.matcher === matcher) continue;
    // Another prefix or a duplicate: ours go, then one fresh entry.
    removeFrom(hooks, event);
    (hooks[event] ??= []).push({ ...(matcher !== undefined ? { matcher } : {}), hooks: [want] });
    changed = true;
  }
  if (agent === 'claude' && out.disableSkillShellExecution !== true) {
    out.disableSkillShellExecution = true;
    changed = true;
  }
  return { settings: out, changed };
}

/** Removes our entries only: a group is dropped when it held nothing but ours, an event and "hooks" when we emptied them. Pure. */
export function removeHooks(settings: Json, agent: InteractiveAgent = 'claude'): { settings: Json; removed: number } {
  const out = structuredClone(settings);
  if (!isObject(out.hooks)) return { settings: out, removed: 0 };
  const setByUs = flagNoted(out);
  const hooks = out.hooks as Record<string, Json[]>;
  let removed = 0;
  for (const event of Object.keys(HOOK_EVENTS)) removed += removeFrom(hooks, event);
  if (removed > 0 && Object.keys(hooks).length === 0) delete out.hooks;
  // Only what install turned on: a user's own setting stays.
  if (agent === 'claude' && setByUs && out.disableSkillShellExecution === true) delete out.disableSkillShellExecution;
  return { settings: out, removed };
}

function removeFrom(hooks: Record<string, Json[]>, event: string): number {
  const groups = hooks[event];
  if (!Array.isArray(groups)) return 0;
  let removed = 0;
  const kept: Json[] = [];
  for (const g of groups) {
    const before = g.hooks as Json[];
    const rest = before.filter((h) => !isOurCommand(h.command));
    removed += before.length - rest.length;
    if (rest.length === before.length) kept.push(g);
    else if (rest.length > 0) kept.push({ ...g, hooks: rest });
  }
  if (removed === 0) return 0;
  if (kept.length > 0) hooks[event] = kept;
  else delete hooks[event];
  return removed;
}

function readSettings(file: string): Json | undefined {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    throw new FactoryError('HookSettingsInvalid', `${file} is not valid JSON (${(err as Error).message}); it was left as it is`);
  }
  checkShape(parsed, file);
  return parsed;
}

function isInside(p: string, top: string): boolean {
  const rel = path.relative(top, p);
  return rel === '' || (!rel.startsWith('..') && !path.isAbsolute(rel));
}

/**
 * The real file to read and write for `file` in the repository at `root`. A
 * repository is not trusted to point us elsewhere: every symlink on the way
 * (.claude, settings.json) must resolve inside the repository, else nothing is
 * read or written. Links inside it are followed to their real file.
 */
export function resolveInRepository(file: string, root: string): string {
  const top = fs.realpathSync(root);
  const rel = path.relative(root, file);
  if (rel === '' || rel.startsWith('..') || path.isAbsolute(rel)) throw new FactoryError('HookSettingsOutside', `${file} is not inside the repository ${root}; nothing was written`);
  let at = top;
  for (const part of rel.split(path.sep)) {
    const next = path.join(at, part);
    let st: fs.Stats;
    try {
      st = fs.lstatSync(next);
    } catch (err) {
      // Not there yet: it and what follows are created inside `at`, which is inside.
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') {
        at = next;
        continue;
      }
      throw err;
    }
    if (!st.isSymbolicLink()) {
      at = next;
      continue;
    }
    const target = fs.readlinkSync(next);
    let real: string;
    try {
      real = fs.realpathSync(next);
    } catch {
      throw new FactoryError('HookSettingsOutside', `${next} is a symlink to ${JSON.stringify(target)}, which does not exist; nothing was written`);
    }
    if (!isInside(real, top)) throw new FactoryError('HookSettingsOutside', `${next} is a symlink to ${JSON.stringify(target)} (${real}), outside the repository ${top}; nothing was written`);
    at = real;
  }
  return at;
}

/** Write to a fresh temporary file beside `file` (never through a link: O_NOFOLLOW, O_EXCL), then rename it over `file`. */
function writeAtomicNoFollow(file: string, text: string): void {
  const dir = path.dirname(file);
  const tmp = path.join(dir, `.${path.basename(file)}.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`);
  const c = fs.constants;
  const mode = fs.statSync(file, { throwIfNoEntry: false })?.mode;
  const fd = fs.openSync(tmp, c.O_WRONLY | c.O_CREAT | c.O_EXCL | c.O_NOFOLLOW, 0o644);
  try {
    // The file keeps its permissions.
    if (mode !== undefined) fs.fchmodSync(fd, mode & 0o777);
    fs.writeSync(fd, text);
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
  try {
    // rename replaces the name `file` itself; it does not follow a link there.
    fs.renameSync(tmp, file);
  } catch (err) {
    fs.rmSync(tmp, { force: true });
    throw err;
  }
}

function writeSettings(file: string, settings: Json, root: string | undefined): void {
  let target = file;
  if (root !== undefined) target = resolveInRepository(file, root);
  else {
    // User scope: through a symlink to the file it points at (dotfile managers link settings.json).
    try {
      target = fs.realpathSync(file);
    } catch {
      // No file yet (or a dangling link): a new one, in a folder made for it.
    }
  }
  fs.mkdirSync(path.dirname(target), { recursive: true });
  writeAtomicNoFollow(target, JSON.stringify(settings, null, 2) + '\n');
}

/**
 * Codex runs a command inside its own sandbox on this computer, which (in its
 * default workspace-write mode) refuses to connect to the app's socket: a
 * routed `<prefix> hook run …` would fail there. A rule file beside hooks.json
 * lets exactly that command run outside Codex's sandbox; Codex applies a rule
 * only when every command of a shell line matches, so `… hook run X && other`
 * stays sandboxed. The file is wholly ours.
 */
export function codexRulesPath(hooksFile: string): string {
  return path.join(path.dirname(hooksFile), 'rules', 'factory-in-a-box.rules');
}

/** The words a shell makes of `line` (blanks, quotes, backslashes), or undefined when it holds anything a shell would expand, run or redirect. */
export function shellWords(line: string): string[] | undefined {
  const words: string[] = [];
  let word: string | undefined;
  for (let i = 0; i < line.length; i++) {
    const ch = line[i]!;
    if (ch === ' ' || ch === '\t') {
      if (word !== undefined) words.push(word);
      word = undefined;
    } else if (ch === "'") {
      const end = line.indexOf("'", i + 1);
      if (end < 0) return undefined;
      word = (word ?? '') + line.slice(i + 1, end);
      i = end;
    } else if (ch === '"') {
      let j = i + 1;
      let text = '';
      for (; j < line.length && line[j] !== '"'; j++) {
        if (line[j] === '$' || line[j] === '`') return undefined;
        if (line[j] === '\\' && j + 1 < line.length && '"\\'.includes(line[j + 1]!)) j++;
        text += line[j];
      }
      if (j >= line.length) return undefined;
      word = (word ?? '') + text;
      i = j;
    } else if (ch === '\\' && i + 1 < line.length) {
      word = (word ?? '') + line[++i];
    } else if (/[$`;&|<>(){}*?[\]~#!\n\r\\]/.test(ch)) {
      return undefined;
    } else {
      word = (word ?? '') + ch;
    }
  }
  if (word !== undefined) words.push(word);
  return words;
}

/** The rule file's text for `prefix`, or undefined when the prefix is not plain words (no rule can name it). */
export function codexRules(prefix: string): string | undefined {
  const words = shellWords(prefix);
  if (!words || words.length === 0) return undefined;
  return [
    `${MARK} --agent codex: routed commands (they run in the session's sandbox) reach the app from outside Codex's own sandbox.`,
    `prefix_rule(pattern = ${JSON.stringify([...words, 'hook', 'run'])}, decision = "allow", justification = "Factory in a Box runs this command in the session's sandbox")`,
    '',
  ].join('\n');
}

/** Our rule file for Codex: written (or removed, with `text` undefined) when it differs; a file there that is not ours is left alone. */
function syncRulesFile(file: string, text: string | undefined, root: string | undefined): boolean {
  const target = root !== undefined ? resolveInRepository(file, root) : file;
  let now: string | undefined;
  try {
    if (fs.lstatSync(target).isSymbolicLink()) throw new FactoryError('HookSettingsOutside', `${target} is a symlink; Factory in a Box writes its own rule file there and left it alone`);
    now = fs.readFileSync(target, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  if (now !== undefined && !now.startsWith(MARK)) {
    if (text === undefined) return false;
    throw new FactoryError('HookSettingsInvalid', `${target} was not written by factory hooks install; it was left as it is`);
  }
  if (now === text) return false;
  if (text === undefined) {
    fs.rmSync(target);
    return true;
  }
  fs.mkdirSync(path.dirname(target), { recursive: true });
  writeAtomicNoFollow(target, text);
  return true;
}

/** `root`: the repository whose .claude/settings.json (or .codex/hooks.json) this is (project scope); nothing outside it is read or written. */
export async function installHooks(file: string, prefix: string, root?: string, agent: InteractiveAgent = 'claude'): Promise<{ changed: boolean; rules?: string }> {
  const { settings, changed } = mergeHooks(readSettings(root !== undefined ? resolveInRepository(file, root) : file) ?? {}, prefix, agent);
  if (agent !== 'codex') {
    if (changed) writeSettings(file, settings, root);
    return { changed };
  }
  const rules = codexRules(prefix);
  const rulesChanged = syncRulesFile(codexRulesPath(file), rules, root);
  if (changed) writeSettings(file, settings, root);
  return { changed: changed || rulesChanged, ...(rules ? { rules: codexRulesPath(file) } : {}) };
}

export async function uninstallHooks(file: string, root?: string, agent: InteractiveAgent = 'claude'): Promise<{ removed: number }> {
  const current = readSettings(root !== undefined ? resolveInRepository(file, root) : file);
  if (agent === 'codex') syncRulesFile(codexRulesPath(file), undefined, root);
  if (!current) return { removed: 0 };
  const { settings, removed } = removeHooks(current, agent);
  if (removed > 0) writeSettings(file, settings, root);
  return { removed };
}
