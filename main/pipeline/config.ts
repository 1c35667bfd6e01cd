// `.factory/pipeline.json`: what each stage runs. The file comes from the task's
// repository, so it is untrusted input: read from the base commit (never the
// working tree), size-capped, parsed with a strict schema, and every problem is
// reported with the field that caused it (e.g. `stages.build.command: expected string`).
import { z } from 'zod';
import { FactoryError } from '../../common/errors.js';
import { STAGE_NAMES, type StageName } from '../../common/domain.js';
import { readRepoFile } from '../git/repo-files.js';
import { EnvironmentSchema, resolveEnvironment, type EnvironmentConfig } from '../environment/env-schema.js';

export const PIPELINE_CONFIG_PATH = '.factory/pipeline.json';
export const MAX_PIPELINE_CONFIG_BYTES = 64 * 1024;
const MAX_COMMAND_CHARS = 16 * 1024;
const MAX_TIMEOUT_SECONDS = 24 * 3600;
export const DEFAULT_STAGE_TIMEOUT_SECONDS = 30 * 60;

const EnvSchema = z
  .record(
    z.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,127}$/, 'must be a shell variable name (letters, digits, underscore)'),
    z.string().max(8192, 'value is longer than 8192 characters'),
  )
  .refine((env) => Object.keys(env).length <= 64, 'at most 64 variables');

export const StageConfigSchema = z.strictObject({
  command: z.string().min(1, 'must not be empty').max(MAX_COMMAND_CHARS, `longer than ${MAX_COMMAND_CHARS} characters`),
  timeoutSeconds: z.number().int().min(1).max(MAX_TIMEOUT_SECONDS).optional(),
  env: EnvSchema.optional(),
  /** Prompt template for agent adapters (issue 4); the command runner ignores it. */
  prompt: z.string().max(64 * 1024).optional(),
});
export type StageConfigInput = z.infer<typeof StageConfigSchema>;

const stagesShape = Object.fromEntries(STAGE_NAMES.map((s) => [s, StageConfigSchema.optional()])) as Record<
  StageName,
  z.ZodOptional<typeof StageConfigSchema>
>;

export const PipelineConfigSchema = z.strictObject({
  /** Agent for this repo's tasks ('command' = run the stage commands as given). */
  agent: z.string().min(1).max(64).regex(/^[a-z0-9-]+$/, 'must be lowercase letters, digits or dashes').optional(),
  env: EnvSchema.optional(),
  stages: z.strictObject(stagesShape).optional(),
  /** What the sandbox needs before the stages run (main/environment/). */
  environment: EnvironmentSchema.optional(),
  /** Commit the agents' scratch files (PLAN.md, REVIEW.md) into the returned branch. */
  commitScratchFiles: z.boolean().optional(),
});

export interface StageConfig {
  command: string;
  timeoutSeconds: number;
  env: Record<string, string>;
  prompt?: string;
  /** True when the repo did not configure this stage. */
  isDefault: boolean;
}

export interface PipelineConfig {
  /** 'repo' when .factory/pipeline.json exists at the base commit. */
  source: 'repo' | 'defaults';
  agent?: string;
  env: Record<string, string>;
  stages: Record<StageName, StageConfig>;
  /** The `environment` section, when the repository has one. */
  environment?: EnvironmentConfig;
  /** False unless the repository asks for its scratch files to be committed. */
  commitScratchFiles: boolean;
}

// A stage the repository does not configure: request shows the task; the others
// are decided on the host from a probe of the work tree (default-stages.ts) and
// skipped with the reason when there is nothing to do. The strings below only
// describe that (they are comments if ever run).
export const DEFAULT_STAGE_COMMANDS: Record<StageName, string> = {
  request: 'echo "Task $FACTORY_TASK_ID on branch $FACTORY_BRANCH (base $FACTORY_BASE_COMMIT)"; echo; cat "$FACTORY_TASK_FILE"',
  plan: '# default: skipped unless an agent is chosen',
  build: '# default: npm run build, make, cargo build or go build ./..., whichever the repository has; else skipped',
  test: '# default: the detected test runner (npm test, cargo test, go test, pytest, make test); else skipped',
  review: '# default: skipped unless an agent is chosen',
  document: '# default: skipped unless an agent is chosen',
};

export function defaultPipelineConfig(): PipelineConfig {
  return resolveConfig({}, 'defaults');
}

function resolveConfig(input: z.infer<typeof PipelineConfigSchema>, source: PipelineConfig['source']): PipelineConfig {
  const stages = {} as Record<StageName, StageConfig>;
  for (const name of STAGE_NAMES) {
    const s = input.stages?.[name];
    stages[name] = s
      ? { command: s.command, timeoutSeconds: s.timeoutSeconds ?? DEFAULT_STAGE_TIMEOUT_SECONDS, env: s.env ?? {}, prompt: s.prompt, isDefault: false }
      : { command: DEFAULT_STAGE_COMMANDS[name], timeoutSeconds: DEFAULT_STAGE_TIMEOUT_SECONDS, env: {}, isDefault: true };
  }
  return {
    source, agent: input.agent, env: input.env ?? {}, stages,
    ...(input.environment ? { environment: resolveEnvironment(input.environment) } : {}),
    commitScratchFiles: input.commitScratchFiles ?? false,
  };
}

export class PipelineConfigError extends FactoryError {
  constructor(message: string) {
    super('InvalidPipelineConfig', `${PIPELINE_CONFIG_PATH}: ${message}`);
  }
}

function describeIssue(issue: z.core.$ZodIssue): string {
  const where = issue.path.length ? issue.path.map(String).join('.') : '(top level)';
  switch (issue.code) {
    case 'invalid_type':
      return `${where}: expected ${issue.expected}`;
    case 'unrecognized_keys':
      return `${where === '(top level)' ? '' : where + '.'}${issue.keys[0]}: unknown field${
        issue.path[0] === 'stages' && issue.path.length === 1 ? ` (stages are ${STAGE_NAMES.join(', ')})` : ''
      }`;
    default:
      return `${where}: ${issue.message}`;
  }
}

/** Parses the text of a pipeline.json; throws PipelineConfigError naming the offending field. */
export function parsePipelineConfig(text: string | Buffer): PipelineConfig {
  const bytes = typeof text === 'string' ? Buffer.byteLength(text) : text.length;
  if (bytes > MAX_PIPELINE_CONFIG_BYTES) {
    throw new PipelineConfigError(`file is ${bytes} bytes, over the ${MAX_PIPELINE_CONFIG_BYTES} byte limit`);
  }
  let json: unknown;
  try {
    json = JSON.parse(typeof text === 'string' ? text : text.toString('utf8'));
  } catch (err) {
    throw new PipelineConfigError(`not valid JSON (${err instanceof Error ? err.message : String(err)})`);
  }
  const parsed = PipelineConfigSchema.safeParse(json);
  if (!parsed.success) {
    throw new PipelineConfigError(describeIssue(parsed.error.issues[0]!));
  }
  return resolveConfig(parsed.data, 'repo');
}

/**
 * Reads .factory/pipeline.json from the repository at `commit` (not the working
 * tree: the sandbox runs what was committed). Absent → defaults.
 */
export async function loadPipelineConfig(repoPath: string, commit: string): Promise<PipelineConfig> {
  let bytes: Buffer | null;
  try {
    bytes = await readRepoFile(repoPath, commit, PIPELINE_CONFIG_PATH, MAX_PIPELINE_CONFIG_BYTES);
  } catch (err) {
    // A folder or symlink in its place, or a file over the cap: the repository's own mistake, named as such.
    if (err instanceof FactoryError && err.name === 'InvalidInput' && err.message.startsWith(PIPELINE_CONFIG_PATH)) {
      throw new PipelineConfigError(err.message.slice(PIPELINE_CONFIG_PATH.length).replace(/^ /, ''));
    }
    throw err;
  }
  return bytes === null ? defaultPipelineConfig() : parsePipelineConfig(bytes);
}
