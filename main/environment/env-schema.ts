// The `environment` section of .factory/pipeline.json: what a repository asks
// its sandbox to hold. Every value comes from the repository (untrusted) and ends
// up in a root shell script in the guest, so names are checked here, before any
// script is made: a Debian package name must be one by Debian's rule, a key file
// must stay inside the repository, an egress request must name a host (never an
// address). Commands are the repository's own and run as they are, in the guest only.
import semver from 'semver';
import { z } from 'zod';
import { repoPathProblem } from '../git/repo-files.js';
import { MemoryMbSchema } from './guest-memory.js';

export const MAX_DEBIAN_PACKAGES = 200;
export const MAX_SETUP_COMMANDS = 32;
export const MAX_COMMAND_CHARS = 16 * 1024;
export const MAX_KEY_FILES = 64;
export const MAX_EGRESS_REQUESTS = 32;

/** Debian policy 5.6.1: lowercase letters, digits, + - . ; at least two characters; starts alphanumeric. */
export const DEBIAN_PACKAGE_NAME = /^[a-z0-9][a-z0-9+.-]{1,99}$/;

export const EnvVarsSchema = z
  .record(
    z.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,127}$/, 'must be a shell variable name (letters, digits, underscore)'),
    z.string().max(8192, 'value is longer than 8192 characters').refine((v) => !v.includes('\0'), 'value contains a NUL byte'),
  )
  .refine((env) => Object.keys(env).length <= 64, 'at most 64 variables');

const Command = z
  .string()
  .min(1, 'must not be empty')
  .max(MAX_COMMAND_CHARS, `longer than ${MAX_COMMAND_CHARS} characters`)
  .refine((c) => !c.includes('\0'), 'contains a NUL byte');

export const CommandsSchema = z.union([Command, z.array(Command).min(1, 'must not be empty').max(MAX_SETUP_COMMANDS, `at most ${MAX_SETUP_COMMANDS} commands`)]);

const NODE_ALIASES = ['node', 'stable', 'latest', 'current', 'lts/*'] as const;
/** Node's LTS code names (nvm's `lts/<name>`) and their major versions. */
export const LTS_CODENAMES: Readonly<Record<string, number>> = {
  argon: 4, boron: 6, carbon: 8, dubnium: 10, erbium: 12, fermium: 14, gallium: 16, hydrogen: 18, iron: 20, jod: 22, krypton: 24,
};

/** Why a Node version spec (as written in .nvmrc, engines.node, ...) is not usable, or undefined. */
export function nodeSpecProblem(spec: string): string | undefined {
  if (spec.length === 0) return 'is empty';
  if (spec.length > 100) return 'is longer than 100 characters';
  if (/[\x00-\x1f\x7f]/.test(spec)) return 'contains a control character';
  const s = spec.toLowerCase();
  if ((NODE_ALIASES as readonly string[]).includes(s)) return undefined;
  if (s.startsWith('lts/')) return LTS_CODENAMES[s.slice(4)] !== undefined ? undefined : `names an unknown LTS line "${spec.slice(4)}"`;
  if (semver.validRange(spec) === null) return 'is not a version or a semver range';
  return undefined;
}

export const NodeSpecSchema = z.string().superRefine((spec, ctx) => {
  const problem = nodeSpecProblem(spec);
  if (problem) ctx.addIssue({ code: 'custom', message: problem });
});

export const RepoPathSchema = z.string().superRefine((p, ctx) => {
  const problem = repoPathProblem(p);
  if (problem) ctx.addIssue({ code: 'custom', message: problem });
});

/** Lowercase DNS name or "*.name"; never an IP literal (the proxy resolves names itself). */
export function hostProblem(host: string): string | undefined {
  const name = host.startsWith('*.') ? host.slice(2) : host;
  if (name.length === 0 || name.length > 253) return 'must be a host name of 1 to 253 characters';
  if (/^[0-9.]+$/.test(name) || name.includes(':') || name.startsWith('[')) return 'must be a host name, not an IP address';
  if (name !== name.toLowerCase()) return 'must be lowercase';
  const label = /^(?!-)[a-z0-9-]{1,63}(?<!-)$/;
  if (!name.split('.').every((l) => label.test(l))) return 'must be a host name (letters, digits, dashes, dots)';
  if (!name.includes('.')) return 'must be a fully qualified host name';
  return undefined;
}

const STEP_NAMES = ['setup', 'request', 'plan', 'build', 'test', 'review', 'document'] as const;

/**
 * One extra destination the repository asks for. Same fields as common/egress.ts's
 * EgressRule (without its label, and with defaults); the lead swaps that schema in.
 */
export const EgressRequestSchema = z.strictObject({
  host: z.string().superRefine((h, ctx) => {
    const problem = hostProblem(h);
    if (problem) ctx.addIssue({ code: 'custom', message: problem });
  }),
  port: z.number().int().min(1).max(65535).optional(),
  scheme: z.enum(['https', 'http']).optional(),
  methods: z.array(z.string().regex(/^[A-Z]{1,16}$/, 'must be an HTTP method in capitals')).max(16).optional(),
  pathPrefixes: z.array(z.string().regex(/^\/[\x21-\x7e]{0,511}$/, 'must start with / and hold only visible ASCII')).max(32).optional(),
  steps: z.array(z.enum(STEP_NAMES)).max(STEP_NAMES.length).optional(),
});
export type EgressRequest = z.infer<typeof EgressRequestSchema>;

export const EnvironmentSchema = z.strictObject({
  packages: z
    .array(z.string().regex(DEBIAN_PACKAGE_NAME, 'must be a Debian package name (lowercase letters, digits, + - .)'))
    .max(MAX_DEBIAN_PACKAGES, `at most ${MAX_DEBIAN_PACKAGES} packages`)
    .optional(),
  node: NodeSpecSchema.optional(),
  setup: CommandsSchema.optional(),
  rootSetup: CommandsSchema.optional(),
  cacheKeyFiles: z.array(RepoPathSchema).max(MAX_KEY_FILES, `at most ${MAX_KEY_FILES} files`).optional(),
  env: EnvVarsSchema.optional(),
  egress: z.array(EgressRequestSchema).max(MAX_EGRESS_REQUESTS, `at most ${MAX_EGRESS_REQUESTS} requests`).optional(),
  /** Guest memory the repository asks for, held to the user's cap (guest-memory.ts). */
  memoryMb: MemoryMbSchema.optional(),
});
export type EnvironmentInput = z.infer<typeof EnvironmentSchema>;

export interface EnvironmentConfig {
  packages: string[];
  node?: string;
  setup: string[];
  rootSetup: string[];
  cacheKeyFiles?: string[];
  env: Record<string, string>;
  egress: EgressRequest[];
  memoryMb?: number;
}

export function toCommands(c: string | string[] | undefined): string[] {
  return c === undefined ? [] : typeof c === 'string' ? [c] : c;
}

export function resolveEnvironment(input: EnvironmentInput): EnvironmentConfig {
  return {
    packages: input.packages ?? [],
    ...(input.node !== undefined ? { node: input.node } : {}),
    setup: toCommands(input.setup),
    rootSetup: toCommands(input.rootSetup),
    ...(input.cacheKeyFiles ? { cacheKeyFiles: input.cacheKeyFiles } : {}),
    env: input.env ?? {},
    egress: input.egress ?? [],
    ...(input.memoryMb !== undefined ? { memoryMb: input.memoryMb } : {}),
  };
}
