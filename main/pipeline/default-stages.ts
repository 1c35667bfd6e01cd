// What a stage the repository did not configure does, decided on the host
// from a probe of the guest's work tree (the detection files and which tools
// are installed): run a detected command, or say why nothing ran (skipped),
// or fail when the repository clearly needs a tool the sandbox lacks. A guest
// can make a stage look skipped or failed by what it prints, never passed:
// the probe only chooses what runs, and a pass still needs its exit status 0.
import { shellWord } from '../../common/shell-quote.js';
import type { StageName } from '../../common/domain.js';
import { GUEST_ENV_FILE, GUEST_REPO_DIR, asAgent, exportLines } from '../guest/guest-shell.js';
import { detectionProbeScript, detectTestCommand, npmScript, parseDetectionProbe, type RepoFiles } from './agents/test-detect.js';
import type { GuestSsh } from '../guest/guest-ssh.js';

/** Programs the probe looks for; pytest is the python3 module. */
export const PROBED_TOOLS = ['npm', 'cargo', 'go', 'make', 'python3', 'pytest'] as const;
export type ProbedTool = (typeof PROBED_TOOLS)[number];

export interface RepoProbe {
  files: RepoFiles;
  tools: ReadonlySet<ProbedTool>;
}

export type StageDecision =
  | { kind: 'run'; command: string; reason: string }
  | { kind: 'skip'; reason: string }
  | { kind: 'fail'; reason: string };

/** The probe: detection files as `name<TAB>base64`, then a `!tool<TAB>name` line per installed tool. */
export function repoProbeScript(): string {
  return [
    detectionProbeScript(),
    'for t in npm cargo go make python3; do command -v "$t" >/dev/null 2>&1 && printf \'!tool\\t%s\\n\' "$t"; done',
    "if command -v python3 >/dev/null 2>&1 && python3 -c 'import pytest' >/dev/null 2>&1; then printf '!tool\\tpytest\\n'; fi",
    'true',
  ].join('\n');
}

export function parseRepoProbe(stdout: string): RepoProbe {
  const tools = new Set<ProbedTool>();
  for (const line of stdout.split('\n')) {
    const m = /^!tool\t([a-z0-9]+)$/.exec(line);
    if (m && (PROBED_TOOLS as readonly string[]).includes(m[1]!)) tools.add(m[1] as ProbedTool);
  }
  return { files: parseDetectionProbe(stdout), tools };
}

export interface ProbeOptions {
  repoDir?: string;
  envFile?: string;
  /** Wraps a script to run as the agent user (default: runuser -u agent with a clean environment). */
  asAgent?: (script: string) => string;
  /** The stage's own environment (pipeline.json `stages.<stage>.env`), as the stage will see it. */
  env?: Record<string, string>;
}

/**
 * Probes the work tree as the stage would see it: as the agent user, with the
 * environment every stage sources (where a setup step may have put tools on PATH).
 */
export async function probeRepo(ssh: GuestSsh, opts: ProbeOptions = {}): Promise<RepoProbe> {
  const envFile = opts.envFile ?? GUEST_ENV_FILE;
  const script = [
    `if [ -f ${shellWord(envFile)} ]; then . ${shellWord(envFile)}; fi`,
    exportLines(opts.env ?? {}),
    `cd ${shellWord(opts.repoDir ?? GUEST_REPO_DIR)} || exit 97`,
    repoProbeScript(),
  ].join('\n');
  const r = await ssh.run((opts.asAgent ?? asAgent)(script), { maxBytes: 1024 * 1024, timeoutMs: 60_000 });
  if (r.code !== 0) throw new Error(`looking at the repository in the sandbox failed (exit ${r.code ?? 'signal'})`);
  return parseRepoProbe(r.stdout);
}

function needs(tool: ProbedTool, probe: RepoProbe, command: string, reason: string): StageDecision {
  if (!probe.tools.has(tool)) return { kind: 'fail', reason: `${reason} but ${tool} is not installed in the sandbox` };
  return { kind: 'run', command, reason };
}

/** GNU make's default goal: the first target that is not special (.PHONY), a pattern or a variable. */
export function makeDefaultTarget(text: string): string | null {
  for (const line of text.split('\n')) {
    if (/^\s/.test(line) || line.startsWith('#')) continue;
    if (/^(?:define|endef|ifn?eq|ifn?def|else|endif|include|-include|sinclude|export|unexport|override|vpath)\b/.test(line)) continue;
    const m = /^([^:=#]+?)\s*::?(?!=)/.exec(line);
    if (!m) continue;
    const first = m[1]!.trim().split(/\s+/)[0]!;
    if (first === '' || first.startsWith('.') || first.includes('%') || first.includes('$')) continue;
    return first;
  }
  return null;
}

export function decideBuild(probe: RepoProbe): StageDecision {
  const pkg = probe.files.get('package.json');
  if (pkg !== undefined && npmScript(pkg, 'build') !== null) return needs('npm', probe, 'npm run build', 'package.json has a build script');
  for (const name of ['GNUmakefile', 'makefile', 'Makefile']) {
    const text = probe.files.get(name);
    const target = text === undefined ? null : makeDefaultTarget(text);
    if (target !== null) return needs('make', probe, 'make', `${name} has a default target (${target.slice(0, 60)})`);
  }
  if (probe.files.has('Cargo.toml')) return needs('cargo', probe, 'cargo build', 'Cargo.toml is present');
  if (probe.files.has('go.mod')) return needs('go', probe, 'go build ./...', 'go.mod is present');
  return { kind: 'skip', reason: 'no build step found' };
}

/** The skip reason names the line that makes the test stage run (pipeline.json's schema: config.ts). */
export const NO_TEST_COMMAND = 'no test command detected; to run one, add to .factory/pipeline.json: "stages": { "test": { "command": "<your test command>" } }';

export function decideTest(probe: RepoProbe): StageDecision {
  const detected = detectTestCommand(probe.files);
  if (!detected) return { kind: 'skip', reason: NO_TEST_COMMAND };
  if (detected.tool === 'pytest' && !probe.tools.has('python3')) {
    return { kind: 'fail', reason: `${detected.reason} but python3 is not installed in the sandbox` };
  }
  return needs(detected.tool, probe, detected.command, detected.reason);
}

/** Stages the command agent has nothing to do for unless the repository configures them. */
export const NOTHING_TO_DO: Partial<Record<StageName, string>> = {
  plan: 'no plan command configured and no agent chosen',
  review: 'no review command configured and no agent chosen',
  document: 'no document command configured and no agent chosen',
};
