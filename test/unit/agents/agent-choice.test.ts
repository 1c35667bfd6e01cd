// Which agent a task gets: the new-task input, else the repo's
// .factory/pipeline.json, else the default in settings — through the app's
// API, with a real repo and real settings on disk (no VM: the image store
// refuses, so the task fails after it was created, which is all this needs).
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { ImageStatus } from '../../../common/domain.js';
import { createFactoryApp, type FactoryApp } from '../../../main/app.js';
import { appPaths } from '../../../main/state/paths.js';
import { makeRepo, tempDir } from '../../support/repo.js';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!();
});

async function app(dataDir = tempDir('agent-choice-')): Promise<FactoryApp> {
  const status: ImageStatus = { state: 'missing', version: 'test' };
  const a = await createFactoryApp({
    host: 'web',
    paths: appPaths({ FACTORY_DATA_DIR: dataDir, FACTORY_CACHE_DIR: path.join(dataDir, 'cache') }),
    vm: {
      images: { status: () => status, ensure: async () => { throw new Error('no image in unit tests'); } },
      qemu: { checkInstalled: async () => ({ ok: true, version: '8' }), start: async () => { throw new Error('no VM in unit tests'); } },
    },
  });
  cleanups.push(() => fs.rmSync(dataDir, { recursive: true, force: true }));
  cleanups.push(() => a.dispose());
  return a;
}

describe('agent choice per task', () => {
  it('lists the agents and keeps the default agent in the settings across restarts', async () => {
    const dataDir = tempDir('agent-choice-');
    const a = await app(dataDir);
    const before = await a.api['settings.get']({});
    expect(before.defaultAgent).toBe('command');
    expect(before.agents).toEqual(expect.arrayContaining(['command', 'claude-code', 'codex']));
    const after = await a.api['settings.set']({ defaultAgent: 'claude-code' });
    expect(after.defaultAgent).toBe('claude-code');
    expect(after.maxParallelTasks).toBe(before.maxParallelTasks);
    await a.dispose();
    const b = await app(dataDir);
    expect((await b.api['settings.get']({})).defaultAgent).toBe('claude-code');
  });

  it('refuses an unknown default agent by name', async () => {
    const a = await app();
    await expect(a.api['settings.set']({ defaultAgent: 'nobody' })).rejects.toMatchObject({ name: 'UnknownAgent', message: expect.stringContaining('"nobody"') });
    await expect(a.api['settings.set']({ defaultAgent: 'Bad Name' })).rejects.toThrow(/lowercase/);
    expect((await a.api['settings.get']({})).defaultAgent).toBe('command');
  });

  it('refuses an agent with no credential at Start, naming the fix, and preflight says so first', async () => {
    const a = await app();
    const repo = await makeRepo({ files: { 'README.md': '# r\n' } });
    cleanups.push(repo.cleanup);
    const fix = 'no Anthropic credential is stored: add an Anthropic API key or a Claude Code token (claude setup-token) in Credentials';
    expect((await a.api['tasks.preflight']({ repoPath: repo.dir, agent: 'claude-code' })).agent).toEqual({ name: 'claude-code', credentialMissing: fix });
    await expect(a.api['tasks.create']({ repoPath: repo.dir, title: 'x', agent: 'claude-code' })).rejects.toMatchObject({ name: 'AgentCredentialMissing', message: `claude-code: ${fix}` });
    await expect(a.api['tasks.create']({ repoPath: repo.dir, title: 'x', agent: 'codex' })).rejects.toMatchObject({
      name: 'AgentCredentialMissing',
      message: 'codex: no OpenAI credential is stored: add an OpenAI API key in Credentials',
    });
    expect(await a.api['tasks.list']({})).toEqual([]);
    // The Command agent needs none; with a key stored, Claude Code starts.
    expect((await a.api['tasks.preflight']({ repoPath: repo.dir })).agent).toEqual({ name: 'command' });
    const cred = await a.api['credentials.set']({ kind: 'anthropic', label: 'Anthropic', value: 'sk-ant-test-not-a-real-key' });
    cleanups.push(() => a.api['credentials.delete']({ id: cred.id }).then(() => undefined));
    expect((await a.api['tasks.preflight']({ repoPath: repo.dir, agent: 'claude-code' })).agent).toEqual({ name: 'claude-code' });
    expect((await a.api['tasks.create']({ repoPath: repo.dir, title: 'x', agent: 'claude-code' })).agent).toBe('claude-code');
  });

  it('takes the new-task choice over pipeline.json, and pipeline.json over the settings', async () => {
    const a = await app();
    // Both agents have a credential: the choice, not the keychain, decides here.
    for (const kind of ['anthropic', 'openai'] as const) {
      const cred = await a.api['credentials.set']({ kind, label: kind, value: `${kind}-test-not-a-real-key` });
      cleanups.push(() => a.api['credentials.delete']({ id: cred.id }).then(() => undefined));
    }
    await a.api['settings.set']({ defaultAgent: 'codex' });
    const plain = await makeRepo({ files: { 'README.md': '# r\n' } });
    const configured = await makeRepo({ files: { '.factory/pipeline.json': JSON.stringify({ agent: 'claude-code' }) } });
    cleanups.push(plain.cleanup, configured.cleanup);
    expect((await a.api['tasks.create']({ repoPath: plain.dir, title: 'x' })).agent).toBe('codex');
    expect((await a.api['tasks.create']({ repoPath: configured.dir, title: 'x' })).agent).toBe('claude-code');
    expect((await a.api['tasks.create']({ repoPath: configured.dir, title: 'x', agent: 'command' })).agent).toBe('command');
  });
});
