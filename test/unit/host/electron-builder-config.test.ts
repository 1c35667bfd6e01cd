// The packaged app's Electron fuses, read the way the packager reads them:
// electron-builder's own config loader and schema check on electron-builder.yml.
// Without these fuses, anyone who can set an environment variable or a flag for
// the installed app (ELECTRON_RUN_AS_NODE, NODE_OPTIONS, --inspect) gets a Node
// runtime or a debugger inside it, with its keychain access.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Configuration } from 'electron-builder';
import { describe, expect, it } from 'vitest';
import { tempDir } from '../../support/repo.js';

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

  it('ships the factory launcher in the resources, under the binary name the launcher looks for', async () => {
    const config = await loadConfig();
    expect(config.extraResources).toEqual([{ from: 'packaging/factory', to: 'factory' }]);
    const launcher = fs.readFileSync(path.join(root, 'packaging/factory'), 'utf8');
    expect(config.linux?.executableName).toBe('factory-in-a-box');
    expect(launcher).toContain(`"$here/../${config.linux?.executableName}"`);
    // macOS names the binary after the product.
    expect(launcher).toContain(`"$here/../MacOS/${config.productName}"`);
    expect(fs.statSync(path.join(root, 'packaging/factory')).mode & 0o111).toBe(0o111);
  });

  it('gives the deb scripts that link /usr/bin/factory and unlink it, and keep electron-builder\'s own steps', async () => {
    const config = await loadConfig();
    const install = deb(config.deb?.afterInstall, config);
    const remove = deb(config.deb?.afterRemove, config);
    // electron-builder's own after-install: the app's link and the sandbox helper's mode.
    expect(install).toContain("ln -sf '/opt/Factory in a Box/factory-in-a-box' '/usr/bin/factory-in-a-box'");
    expect(install).toContain("chmod 4755 '/opt/Factory in a Box/chrome-sandbox'");
    expect(remove).toContain("update-alternatives --remove 'factory-in-a-box' '/opt/Factory in a Box/factory-in-a-box'");
    expect(install).toContain("FACTORY_LAUNCHER='/opt/Factory in a Box/resources/factory'");
    expect(remove).toContain("FACTORY_LAUNCHER='/opt/Factory in a Box/resources/factory'");
    for (const script of [install, remove]) expect(spawnSync('bash', ['-n'], { input: script }).status).toBe(0);
  });

  it('the deb\'s factory link: made, kept on reinstall, never over someone else\'s /usr/bin/factory, removed only if ours', async () => {
    // The scripts' factory part run by bash, /usr/bin moved into a scratch folder (no root here).
    const config = await loadConfig();
    const dir = tempDir('factory-deb-');
    const part = (file: string | null | undefined) =>
      deb(file, config).slice(deb(file, config).indexOf('FACTORY_LAUNCHER=')).replaceAll('/usr/bin/factory', path.join(dir, 'factory'));
    const install = () => spawnSync('bash', ['-c', part(config.deb?.afterInstall)], { encoding: 'utf8' });
    const remove = () => spawnSync('bash', ['-c', part(config.deb?.afterRemove)], { encoding: 'utf8' });
    const link = path.join(dir, 'factory');
    try {
      expect(install().status).toBe(0);
      expect(fs.readlinkSync(link)).toBe('/opt/Factory in a Box/resources/factory');
      expect(install().status).toBe(0);
      expect(fs.readlinkSync(link)).toBe('/opt/Factory in a Box/resources/factory');
      expect(remove().status).toBe(0);
      expect(fs.lstatSync(link, { throwIfNoEntry: false })).toBeUndefined();
      // Another program's factory: left alone by both, and the install says how to link ours.
      fs.writeFileSync(link, '#!/bin/sh\necho other\n', { mode: 0o755 });
      const r = install();
      expect(r.status).toBe(0);
      expect(r.stderr).toContain('/usr/bin/factory exists and is not Factory in a Box\'s: left alone'.replace('/usr/bin/factory', link));
      expect(remove().status).toBe(0);
      expect(fs.readFileSync(link, 'utf8')).toContain('echo other');
      // A link of someone else's, to elsewhere: not removed either.
      fs.rmSync(link);
      fs.symlinkSync('/usr/local/other/factory', link);
      expect(remove().status).toBe(0);
      expect(fs.readlinkSync(link)).toBe('/usr/local/other/factory');
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

/** A deb script as electron-builder writes it: its ${name} macros filled in (an unknown one fails the build there, here too). */
function deb(file: string | null | undefined, config: Configuration): string {
  expect(typeof file).toBe('string');
  const text = fs.readFileSync(path.join(root, file!), 'utf8');
  const macros: Record<string, string> = { executable: config.linux!.executableName!, sanitizedProductName: config.productName!, productFilename: config.productName! };
  return text.replace(/\$\{([a-zA-Z]+)\}/g, (_, name: string) => {
    if (!(name in macros)) throw new Error(`unknown macro \${${name}} in ${file}`);
    return macros[name]!;
  });
}
