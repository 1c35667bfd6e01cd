import { afterAll, describe, expect, it } from 'vitest';
import { planEnvironment } from '../../../main/environment/environment-plan.js';
import { guestMemory } from '../../../main/environment/guest-memory.js';
import { loadPipelineConfig, parsePipelineConfig } from '../../../main/pipeline/config.js';
import { SettingsSchema } from '../../../main/state/settings.js';
import { makeRepo, type FixtureRepo } from '../../support/repo.js';

const repos: FixtureRepo[] = [];
afterAll(() => repos.forEach((r) => r.cleanup()));

async function planFor(files: Record<string, string>, memory?: { defaultMb: number; maxMb: number }) {
  const r = await makeRepo({ files });
  repos.push(r);
  const config = await loadPipelineConfig(r.dir, r.head());
  return planEnvironment({ repoPath: r.dir, commit: r.head(), config, imageVersion: 'debian-bookworm-1', resolveNode: async () => '22.12.0', ...(memory ? { memory } : {}) });
}

const pipeline = (environment: unknown) => JSON.stringify({ environment });
const parseError = (environment: unknown): string => {
  try {
    parsePipelineConfig(Buffer.from(pipeline(environment)));
  } catch (err) {
    return (err as Error).message;
  }
  return 'accepted';
};

describe('guest memory a repository asks for', () => {
  const bounds = { defaultMb: 1024, maxMb: 4096 };

  it('gives a repository that asks for nothing the user\'s default, with no line at Start', () => {
    expect(guestMemory(undefined, bounds)).toEqual({ memoryMb: 1024, capped: false });
  });

  it('gives what the repository asks for up to the user\'s cap, and says so at Start', () => {
    expect(guestMemory(2048, bounds)).toMatchObject({ memoryMb: 2048, capped: false, line: 'Guest memory 2048 MiB (pipeline.json environment.memoryMb)' });
    expect(guestMemory(512, bounds).memoryMb).toBe(512);
  });

  it('holds a repository asking for more than the cap to the cap, naming both amounts and the setting', () => {
    const m = guestMemory(16384, bounds);
    expect(m).toMatchObject({ memoryMb: 4096, requestedMb: 16384, capped: true });
    expect(m.line).toContain('asks for 16384 MiB');
    expect(m.line).toContain('4096 MiB your settings allow');
    expect(m.line).toContain('vmMemoryMaxMb');
    // A cap below the user's own default never shrinks the default.
    expect(guestMemory(4096, { defaultMb: 2048, maxMb: 1024 }).memoryMb).toBe(2048);
  });

  it('refuses amounts that are not whole 256 MiB steps in range, or not numbers, naming the field', () => {
    for (const [value, why] of [
      [3000, /environment\.memoryMb.*multiple of 256/],
      [128, /environment\.memoryMb.*at least 256/],
      [1e9, /environment\.memoryMb.*at most 65536/],
      [1024.5, /environment\.memoryMb: expected int/],
      ['4096', /environment\.memoryMb/],
      [-1024, /environment\.memoryMb.*at least 256/],
      [null, /environment\.memoryMb/],
    ] as const) {
      expect(parseError({ memoryMb: value }), `memoryMb ${JSON.stringify(value)}`).toMatch(why);
    }
    expect(parseError({ memoryMb: 2048 })).toBe('accepted');
  });

  it('has a settings default cap that is at least the default memory', () => {
    const s = SettingsSchema.parse({});
    expect(s.vmMemoryMaxMb).toBeGreaterThanOrEqual(s.vmMemoryMb);
  });
});

describe('guest memory in the environment plan', () => {
  it('plans the capped amount and shows the line at Start when a repository asks for more than the user allows', async () => {
    const p = await planFor({ '.factory/pipeline.json': pipeline({ memoryMb: 8192, packages: ['make'] }) }, { defaultMb: 1024, maxMb: 3072 });
    expect(p.memoryMb).toBe(3072);
    expect(p.summary.some((l) => l.includes('asks for 8192 MiB') && l.startsWith('Guest memory 3072 MiB'))).toBe(true);
  });

  it('holds a repository to the settings\' default cap when the caller gives no bounds', async () => {
    const p = await planFor({ '.factory/pipeline.json': pipeline({ memoryMb: 65536 }) });
    expect(p.memoryMb).toBe(SettingsSchema.parse({}).vmMemoryMaxMb);
  });

  it('leaves the setup to detection when the environment only sizes the guest', async () => {
    const p = await planFor({
      '.factory/pipeline.json': pipeline({ memoryMb: 2048 }),
      Makefile: 'all:\n\tcc -o hello hello.c\n',
      'hello.c': 'int main(){return 0;}\n',
    });
    expect(p.source).toBe('detected');
    expect(p.debianPackages).toEqual(['make', 'gcc', 'libc6-dev']);
    expect(p.memoryMb).toBe(2048);
    expect(p.summary).toContain('Guest memory 2048 MiB (pipeline.json environment.memoryMb)');
  });

  it('plans no memory of its own for a repository that asks for none', async () => {
    const p = await planFor({ Makefile: 'all:\n\ttrue\n' });
    expect(p.memoryMb).toBeUndefined();
    expect(p.summary.some((l) => l.startsWith('Guest memory'))).toBe(false);
  });
});
