// A repository's devcontainer.json, read for what a sandbox can honour: the
// lifecycle commands that prepare the project, containerEnv and remoteUser.
// What needs a container runtime or registry (images, Dockerfiles, features,
// compose, mounts, ports, run arguments) cannot exist in a sandbox VM; each such
// piece is named in `unsupported`, never silently dropped. initializeCommand runs
// on the host in the devcontainer spec: here it never runs anywhere.
import { parse, printParseErrorCode, type ParseError } from 'jsonc-parser';
import { z } from 'zod';
import { FactoryError } from '../../common/errors.js';
import { shellQuote } from '../../common/shell-quote.js';
import { GUEST_REPO_DIR } from '../guest/guest-shell.js';
import { EnvVarsSchema, MAX_COMMAND_CHARS, MAX_SETUP_COMMANDS } from './env-schema.js';

export const DEVCONTAINER_PATHS = ['.devcontainer/devcontainer.json', '.devcontainer.json'] as const;
export const MAX_DEVCONTAINER_BYTES = 64 * 1024;

/** The lifecycle commands honoured, in the order the devcontainer spec runs them. */
const LIFECYCLE = ['onCreateCommand', 'updateContentCommand', 'postCreateCommand'] as const;
/** Keys that only describe or decorate: nothing to run, nothing lost. */
const METADATA = new Set(['$schema', 'name', 'customizations', 'hostRequirements', 'portsAttributes', 'otherPortsAttributes', 'waitFor', 'shutdownAction', 'userEnvProbe', 'updateRemoteUserUID']);
const HONOURED = new Set<string>([...LIFECYCLE, 'containerEnv', 'remoteUser', 'containerUser', 'features']);
const WHY: Record<string, string> = {
  image: 'needs a container registry',
  dockerFile: 'needs a container build',
  build: 'needs a container build',
  dockerComposeFile: 'needs Docker Compose',
  forwardPorts: 'the sandbox forwards no ports',
  appPort: 'the sandbox forwards no ports',
  mounts: 'no host folder is shared into a sandbox',
  workspaceMount: 'no host folder is shared into a sandbox',
  runArgs: 'needs a container runtime',
  initializeCommand: 'it runs on the host; the app never runs repository commands there',
  postStartCommand: 'runs at container start; the sandbox runs setup once',
  postAttachCommand: 'runs when an editor attaches',
  remoteEnv: 'not applied; use containerEnv',
};

const Word = z.string().max(MAX_COMMAND_CHARS).refine((w) => !w.includes('\0'), 'contains a NUL byte');
const OneCommand = z.union([Word.min(1, 'must not be empty'), z.array(Word).min(1, 'must not be empty').max(256)]);
const LifecycleCommand = z.union([OneCommand, z.record(z.string().max(100), OneCommand)]);

export interface DevcontainerCommand {
  /** e.g. "postCreateCommand" or "postCreateCommand.deps". */
  label: string;
  /** One shell line that runs it (a string through /bin/sh -c as the spec says, an array as argv). */
  line: string;
}

export interface DevcontainerPlan {
  path: string;
  commands: DevcontainerCommand[];
  /** Who runs the commands: root when remoteUser/containerUser is root, else the agent user. */
  user: 'root' | 'agent';
  env: Record<string, string>;
  summary: string[];
  unsupported: string[];
}

function fail(path: string, message: string): never {
  throw new FactoryError('InvalidInput', `${path}: ${message}`);
}

function commandLine(c: string | string[]): string {
  return typeof c === 'string' ? `/bin/sh -c ${shellQuote(c)}` : c.map(shellQuote).join(' ');
}

/** Parses devcontainer.json (JSON with comments and trailing commas). Throws naming the file and field. */
export function parseDevcontainer(path: string, bytes: Buffer): DevcontainerPlan {
  if (bytes.length > MAX_DEVCONTAINER_BYTES) fail(path, `file is ${bytes.length} bytes, over the ${MAX_DEVCONTAINER_BYTES} byte limit`);
  const errors: ParseError[] = [];
  let json: unknown;
  try {
    json = parse(bytes.toString('utf8'), errors, { allowTrailingComma: true, disallowComments: false, allowEmptyContent: false });
  } catch (err) {
    // Deep nesting can exhaust the parser's stack.
    fail(path, `could not be parsed (${err instanceof Error ? err.message : String(err)})`);
  }
  if (errors.length > 0) fail(path, `not valid JSON with comments: ${printParseErrorCode(errors[0]!.error)} at offset ${errors[0]!.offset}`);
  if (typeof json !== 'object' || json === null || Array.isArray(json)) fail(path, '(top level): expected object');
  const obj = json as Record<string, unknown>;
  const unsupported: string[] = [];
  const summary: string[] = [];

  for (const key of Object.keys(obj)) {
    if (HONOURED.has(key) || METADATA.has(key)) continue;
    unsupported.push(`devcontainer "${printable(key)}" (${WHY[key] ?? 'not supported in a sandbox VM'})`);
  }
  if (obj.features !== undefined) {
    if (typeof obj.features !== 'object' || obj.features === null || Array.isArray(obj.features)) fail(path, 'features: expected object');
    for (const id of Object.keys(obj.features)) unsupported.push(`devcontainer feature "${printable(id)}" (needs a container registry)`);
  }

  const commands: DevcontainerCommand[] = [];
  for (const key of LIFECYCLE) {
    if (obj[key] === undefined) continue;
    const parsed = LifecycleCommand.safeParse(obj[key]);
    if (!parsed.success) {
      const issue = parsed.error.issues[0]!;
      fail(path, `${[key, ...issue.path.map(String)].join('.')}: ${issue.code === 'invalid_type' || issue.code === 'invalid_union' ? 'expected a string, an array of strings or an object of them' : issue.message}`);
    }
    const value = parsed.data;
    if (typeof value === 'string' || Array.isArray(value)) {
      commands.push({ label: key, line: commandLine(value) });
    } else {
      const names = Object.keys(value);
      for (const name of names) commands.push({ label: `${key}.${name}`, line: commandLine(value[name]!) });
      if (names.length > 1) summary.push(`${key}: ${names.length} named commands run one after another (the devcontainer spec runs them in parallel)`);
    }
  }
  if (commands.length > MAX_SETUP_COMMANDS) fail(path, `${commands.length} commands; at most ${MAX_SETUP_COMMANDS}`);

  let env: Record<string, string> = {};
  if (obj.containerEnv !== undefined) {
    const parsed = EnvVarsSchema.safeParse(obj.containerEnv);
    if (!parsed.success) {
      const issue = parsed.error.issues[0]!;
      fail(path, `${['containerEnv', ...issue.path.map(String)].join('.')}: ${issue.code === 'invalid_type' ? `expected ${issue.expected}` : issue.message}`);
    }
    env = expandVariables(parsed.data, unsupported);
  }

  let user: 'root' | 'agent' = 'agent';
  const userKey = obj.remoteUser !== undefined ? 'remoteUser' : obj.containerUser !== undefined ? 'containerUser' : undefined;
  if (userKey) {
    const named = obj[userKey];
    if (typeof named !== 'string' || named.length === 0 || named.length > 64) fail(path, `${userKey}: expected a user name`);
    if (named === 'root' || named === '0') user = 'root';
    else summary.push(`${userKey} "${printable(named)}" runs as the sandbox's agent user`);
  }
  return { path, commands, user, env, summary, unsupported };
}

/** ${containerWorkspaceFolder} is the repository in the guest; other variables are not expanded, and named (${localEnv:...} would read the host). */
function expandVariables(env: Record<string, string>, unsupported: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(env)) {
    const expanded = v
      .replaceAll('${containerWorkspaceFolder}', GUEST_REPO_DIR)
      .replaceAll('${containerWorkspaceFolderBasename}', GUEST_REPO_DIR.split('/').pop()!);
    for (const m of expanded.matchAll(/\$\{([A-Za-z]+(?::[^}]*)?)\}/g)) {
      unsupported.push(`devcontainer variable "\${${printable(m[1]!)}}" in containerEnv.${k} (left as written)`);
    }
    out[k] = expanded;
  }
  return out;
}

/** Names from the file, safe to show on one line. */
export function printable(s: string): string {
  const clean = s.replace(/[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g, '?');
  return clean.length > 120 ? `${clean.slice(0, 120)}…` : clean;
}
