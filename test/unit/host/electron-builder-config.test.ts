// The packaged app's Electron fuses, read the way the packager reads them:
// electron-builder's own config loader and schema check on electron-builder.yml.
// Without these fuses, anyone who can set an environment variable or a flag for
// the installed app (ELECTRON_RUN_AS_NODE, NODE_OPTIONS, --inspect) gets a Node
// runtime or a debugger inside it, with its keychain access.
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Configuration } from 'electron-builder';
import { describe, expect, it } from 'vitest';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
// app-builder-lib is electron-builder's own library: resolved from electron-builder
// so the loader and schema are those of the version that packages the app.
const fromBuilder = createRequire(createRequire(path.join(root, 'package.json')).resolve('electron-builder'));
const configModule = fromBuilder('app-builder-lib/out/util/config/config.js') as {
  getConfig(projectDir: string, configPath: string | null, fromOptions: null): Promise<Configuration>;
  validateConfiguration(config: Configuration, debugLogger: unknown): Promise<void>;
};
const { DebugLogger } = fromBuilder('builder-util') as { DebugLogger: new (enabled: boolean) => unknown };

async function loadConfig(): Promise<Configuration> {
  const config = await configModule.getConfig(root, path.join(root, 'electron-builder.yml'), null);
  await configModule.validateConfiguration(config, new DebugLogger(false));
  return config;
}

describe('electron-builder.yml', () => {
  it('sets every hardening fuse as intended, and electron-builder accepts it', async () => {
    const config = await loadConfig();
    expect(config.electronFuses).toEqual({
      runAsNode: false,
      enableNodeOptionsEnvironmentVariable: false,
      enableNodeCliInspectArguments: false,
      enableCookieEncryption: true,
      enableEmbeddedAsarIntegrityValidation: true,
      onlyLoadAppFromAsar: true,
    });
    // OnlyLoadAppFromAsar and the integrity check need the app packed as app.asar.
    expect(config.asar).not.toBe(false);
  });

  it('is checked against the schema: a misspelt fuse would be refused, not silently ignored', async () => {
    const config = await loadConfig();
    const misspelt = { ...config, electronFuses: { ...config.electronFuses, runAsNod: false } } as unknown as Configuration;
    await expect(configModule.validateConfiguration(misspelt, new DebugLogger(false))).rejects.toThrow(/electronFuses/);
  });
});
