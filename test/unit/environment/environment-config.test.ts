import { describe, expect, it } from 'vitest';
import { parsePipelineConfig } from '../../../main/pipeline/config.js';

function errorOf(environment: unknown): string {
  try {
    parsePipelineConfig(JSON.stringify({ environment }));
  } catch (err) {
    return (err as Error).message;
  }
  throw new Error('expected the config to be rejected');
}

describe('pipeline.json environment section', () => {
  it('parses every field and exposes it on the config, with commitScratchFiles off by default', () => {
    const cfg = parsePipelineConfig(JSON.stringify({
      environment: {
        packages: ['gcc', 'libssl-dev', 'g++', 'python3.11'],
        node: 'lts/iron',
        setup: 'npm ci',
        rootSetup: ['echo one', 'echo two'],
        cacheKeyFiles: ['package-lock.json', 'tools/versions.txt'],
        env: { CI: '1' },
        egress: [{ host: 'example.com' }, { host: '*.pythonhosted.org', scheme: 'http', port: 8080, methods: ['GET'], pathPrefixes: ['/simple/'], steps: ['setup'] }],
      },
    }));
    expect(cfg.environment).toEqual({
      packages: ['gcc', 'libssl-dev', 'g++', 'python3.11'],
      node: 'lts/iron',
      setup: ['npm ci'],
      rootSetup: ['echo one', 'echo two'],
      cacheKeyFiles: ['package-lock.json', 'tools/versions.txt'],
      env: { CI: '1' },
      egress: [{ host: 'example.com' }, { host: '*.pythonhosted.org', scheme: 'http', port: 8080, methods: ['GET'], pathPrefixes: ['/simple/'], steps: ['setup'] }],
    });
    expect(cfg.commitScratchFiles).toBe(false);
    expect(parsePipelineConfig('{"commitScratchFiles":true}').commitScratchFiles).toBe(true);
    expect(parsePipelineConfig('{}').environment).toBeUndefined();
  });

  it.each([
    [{ packages: ['gcc; rm -rf /'] }, 'environment.packages.0: must be a Debian package name'],
    [{ packages: ['-oAPT::Get::AllowUnauthenticated=true'] }, 'environment.packages.0: must be a Debian package name'],
    [{ packages: ['gcc', 'make\nrm'] }, 'environment.packages.1: must be a Debian package name'],
    [{ packages: ['GCC'] }, 'environment.packages.0: must be a Debian package name'],
    [{ packages: ['g'] }, 'environment.packages.0: must be a Debian package name'],
    [{ packages: ['$(id)'] }, 'environment.packages.0'],
    [{ node: 'latest-ish' }, 'environment.node: is not a version or a semver range'],
    [{ node: '22\u0000' }, 'environment.node: contains a control character'],
    [{ node: 'lts/nonesuch' }, 'environment.node: names an unknown LTS line'],
    [{ setup: '' }, 'environment.setup: '],
    [{ setup: [] }, 'environment.setup'],
    [{ setup: ['ok', 42] }, 'environment.setup'],
    [{ cacheKeyFiles: ['../secrets'] }, "environment.cacheKeyFiles.0: must not contain '..'"],
    [{ cacheKeyFiles: ['/etc/shadow'] }, 'environment.cacheKeyFiles.0: must be relative'],
    [{ cacheKeyFiles: ['a\u001b[31m'] }, 'environment.cacheKeyFiles.0: contains a control character'],
    [{ env: { 'BAD NAME': 'x' } }, 'environment.env.BAD NAME'],
    [{ egress: [{ host: '169.254.169.254' }] }, 'environment.egress.0.host: must be a host name, not an IP address'],
    [{ egress: [{ host: '[::1]' }] }, 'environment.egress.0.host: must be a host name, not an IP address'],
    [{ egress: [{ host: 'Example.COM' }] }, 'environment.egress.0.host: must be lowercase'],
    [{ egress: [{ host: 'localhost' }] }, 'environment.egress.0.host: must be a fully qualified host name'],
    [{ egress: [{ host: 'a.com', scheme: 'ftp' }] }, 'environment.egress.0.scheme'],
    [{ egress: [{ host: 'a.com', steps: ['deploy'] }] }, 'environment.egress.0.steps.0'],
    [{ egress: [{ host: 'a.com', pathPrefixes: ['/a b'] }] }, 'environment.egress.0.pathPrefixes.0'],
    [{ egress: [{ host: 'a.com', extra: 1 }] }, 'environment.egress.0.extra: unknown field'],
    [{ tools: { node: '22' } }, 'environment.tools: unknown field'],
  ])('refuses %j naming the field', (environment, expected) => {
    const message = errorOf(environment);
    expect(message).toContain('.factory/pipeline.json: ');
    expect(message).toContain(expected);
  });

  it('refuses 10,000 packages (a config that still fits the size cap)', () => {
    const packages = Array.from({ length: 10_000 }, (_, i) => `p${i % 10}`);
    expect(JSON.stringify({ environment: { packages } }).length).toBeLessThan(64 * 1024);
    expect(errorOf({ packages })).toContain('environment.packages: at most 200 packages');
  });

  it('refuses a 70 KiB config before parsing it', () => {
    const setup = Array.from({ length: 20 }, () => 'x'.repeat(3600));
    expect(() => parsePipelineConfig(JSON.stringify({ environment: { setup } }))).toThrow(/over the 65536 byte limit/);
  });
});
