import { describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import {
  DEFAULT_STAGE_COMMANDS,
  DEFAULT_STAGE_TIMEOUT_SECONDS,
  MAX_PIPELINE_CONFIG_BYTES,
  defaultPipelineConfig,
  loadPipelineConfig,
  parsePipelineConfig,
} from '../../../main/pipeline/config.js';
import { makeRepo } from '../../support/repo.js';

function errorOf(text: string): string {
  try {
    parsePipelineConfig(text);
  } catch (err) {
    return (err as Error).message;
  }
  throw new Error('expected the config to be rejected');
}

describe('pipeline config', () => {
  it('parses a valid config and fills the stages it leaves out with defaults', () => {
    const cfg = parsePipelineConfig(
      JSON.stringify({
        env: { GREETING: 'hi' },
        stages: { build: { command: 'make', timeoutSeconds: 90, env: { CC: 'gcc' } }, test: { command: 'make test' } },
      }),
    );
    expect(cfg.source).toBe('repo');
    expect(cfg.env).toEqual({ GREETING: 'hi' });
    expect(cfg.stages.build).toMatchObject({ command: 'make', timeoutSeconds: 90, env: { CC: 'gcc' }, isDefault: false });
    expect(cfg.stages.test).toMatchObject({ command: 'make test', timeoutSeconds: DEFAULT_STAGE_TIMEOUT_SECONDS });
    expect(cfg.stages.plan).toMatchObject({ command: DEFAULT_STAGE_COMMANDS.plan, isDefault: true });
  });

  it('gives every stage a harmless default when there is no config', () => {
    const cfg = defaultPipelineConfig();
    expect(cfg.source).toBe('defaults');
    expect(Object.keys(cfg.stages)).toEqual(['request', 'plan', 'build', 'test', 'review', 'document']);
    expect(cfg.stages.request.command).toContain('FACTORY_TASK_FILE');
    expect(cfg.stages.test).toMatchObject({ isDefault: true });
  });

  it.each([
    ['{"stages":{"build":{"command":42}}}', 'stages.build.command: expected string'],
    ['{"stages":{"build":{}}}', 'stages.build.command: expected string'],
    ['{"stages":{"test":{"command":""}}}', 'stages.test.command: must not be empty'],
    ['{"stages":{"test":{"command":"x","timeoutSeconds":-1}}}', 'stages.test.timeoutSeconds'],
    ['{"stages":{"test":{"command":"x","timeoutSeconds":"10"}}}', 'stages.test.timeoutSeconds: expected number'],
    ['{"stages":{"deploy":{"command":"x"}}}', 'stages.deploy: unknown field'],
    ['{"stages":{"build":{"command":"x","comand":"y"}}}', 'stages.build.comand: unknown field'],
    ['{"env":{"BAD-NAME":"x"}}', 'env.BAD-NAME'],
    ['{"env":{"OK":3}}', 'env.OK: expected string'],
    ['{"stages":[]}', 'stages: expected object'],
    ['[]', '(top level): expected object'],
    ['{"stages": ', 'not valid JSON'],
  ])('rejects %s naming the field', (text, expected) => {
    const message = errorOf(text);
    expect(message).toContain('.factory/pipeline.json: ');
    expect(message).toContain(expected);
  });

  it('rejects an oversize file before parsing it', () => {
    const big = JSON.stringify({ stages: { build: { command: 'x' } }, pad: 'a'.repeat(MAX_PIPELINE_CONFIG_BYTES) });
    expect(errorOf(big)).toMatch(/over the 65536 byte limit/);
  });

  it('reads the config from the base commit, not the working tree', async () => {
    const repo = await makeRepo({
      files: { 'README.md': 'hi\n', '.factory/pipeline.json': JSON.stringify({ stages: { build: { command: 'echo committed' } } }) },
    });
    try {
      // An uncommitted edit must not change what the sandbox runs.
      repo.write('.factory/pipeline.json', JSON.stringify({ stages: { build: { command: 'echo working-tree' } } }));
      const cfg = await loadPipelineConfig(repo.dir, repo.head());
      expect(cfg.stages.build.command).toBe('echo committed');
      // A commit without the file gets the defaults.
      const noConfig = await makeRepo({ files: { 'a.txt': 'a\n' } });
      expect((await loadPipelineConfig(noConfig.dir, noConfig.head())).source).toBe('defaults');
      noConfig.cleanup();
    } finally {
      repo.cleanup();
    }
  });

  it('reports an invalid committed config with the field', async () => {
    const repo = await makeRepo({ files: { '.factory/pipeline.json': '{"stages":{"build":{"command":42}}}' } });
    try {
      await expect(loadPipelineConfig(repo.dir, repo.head())).rejects.toThrow('stages.build.command: expected string');
      execFileSync('git', ['rm', '-q', '-r', '.factory'], { cwd: repo.dir });
      repo.commit('drop config');
      await expect(loadPipelineConfig(repo.dir, repo.head())).resolves.toMatchObject({ source: 'defaults' });
    } finally {
      repo.cleanup();
    }
  });
});
