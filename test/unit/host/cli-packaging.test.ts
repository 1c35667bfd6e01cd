// The `factory` command line in the packaged app: the app binary turns into the
// CLI when its first argument is --factory-cli (cliArgv), the launcher script
// shipped in the app's resources starts it so (run here by a real shell, with a
// stand-in for the app binary that prints the arguments it got: no Electron
// runtime exists here), and the command Settings shows for each kind of install
// (cliInstall) is run by a real bash to see that it does what it says.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { cliInstall, FROM_SOURCE } from '../../../main/cli/cli-install.js';
import { headlessCommand } from '../../../main/cli/launcher.js';
import { CLI_FLAG, cliArgv, DISPLAYLESS_SWITCHES, electronMode, HEADLESS_FLAG } from '../../../main/cli/cli-route.js';
import { tempDir } from '../../support/repo.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const LAUNCHER = path.join(root, 'packaging/factory');

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});
function scratch(): string {
  const d = tempDir('factory-cli-pkg-');
  dirs.push(d);
  return d;
}

/** A stand-in for the app binary: prints each argument NUL-terminated (newlines survive), exits with $STANDIN_EXIT. */
function standIn(file: string): void {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, '#!/bin/sh\nfor a in "$@"; do printf \'%s\\0\' "$a"; done\nexit "${STANDIN_EXIT:-0}"\n', { mode: 0o755 });
}

function run(file: string, args: string[], env: NodeJS.ProcessEnv = {}) {
  const r = spawnSync(file, args, { encoding: 'utf8', env: { PATH: process.env.PATH, ...env } });
  return { status: r.status, argv: r.stdout.split('\0').slice(0, -1), stderr: r.stderr };
}

/** An installed app as the deb lays it out, in a folder whose name has spaces. */
function linuxInstall(): { app: string; launcher: string } {
  const app = path.join(scratch(), 'opt', 'Factory in a Box');
  standIn(path.join(app, 'factory-in-a-box'));
  const launcher = path.join(app, 'resources', 'factory');
  fs.mkdirSync(path.dirname(launcher), { recursive: true });
  fs.copyFileSync(LAUNCHER, launcher);
  fs.chmodSync(launcher, 0o755);
  return { app, launcher };
}

/** What the Linux launcher puts before the user's words. */
const LINUX = [...DISPLAYLESS_SWITCHES, CLI_FLAG, '--'];
const HOSTILE = ['run', '/home/me/my repo', 'it\'s "quoted"', 'two\nlines', '', '--json', '--', '$(touch pwned)', '*', 'ünïcode'];

describe('cliArgv: when the app binary is the CLI', () => {
  it('takes the words after the flag (packaged: argv[1]; from a checkout: after the app path)', () => {
    expect(cliArgv(['/opt/app/factory-in-a-box', CLI_FLAG, 'ls', '--json'], false)).toEqual(['ls', '--json']);
    expect(cliArgv(['/usr/lib/electron', '.', CLI_FLAG, 'ls'], true)).toEqual(['ls']);
    expect(cliArgv(['/opt/app/factory-in-a-box', CLI_FLAG], false)).toEqual([]);
  });

  it('passes over the displayless Chromium switches the Linux launcher puts first, and only those, only before the flag', () => {
    expect(cliArgv(['bin', '--ozone-platform=headless', '--disable-gpu', CLI_FLAG, '--', 'ls'], false)).toEqual(['ls']);
    expect(cliArgv(['bin', '--disable-gpu', CLI_FLAG, 'ls'], false)).toEqual(['ls']);
    // Any other switch first: the app, not the CLI.
    expect(cliArgv(['bin', '--ozone-platform=x11', CLI_FLAG, 'ls'], false)).toBeUndefined();
    expect(cliArgv(['bin', '--disable-gpu', 'ls', CLI_FLAG], false)).toBeUndefined();
    // After the flag they are the user's words, kept.
    expect(cliArgv(['bin', CLI_FLAG, '--', '--disable-gpu'], false)).toEqual(['--disable-gpu']);
  });

  it('drops the launcher\'s one `--` and keeps the user\'s own', () => {
    expect(cliArgv(['bin', CLI_FLAG, '--', 'exec', 't1', '--', 'sh', '-c', 'exit 3'], false)).toEqual(['exec', 't1', '--', 'sh', '-c', 'exit 3']);
    expect(cliArgv(['bin', CLI_FLAG, '--', '--', 'x'], false)).toEqual(['--', 'x']);
  });

  it('is the app, not the CLI, without the flag first: a task text or path holding the flag changes nothing', () => {
    expect(cliArgv(['/opt/app/factory-in-a-box'], false)).toBeUndefined();
    expect(cliArgv(['/opt/app/factory-in-a-box', '--no-sandbox', CLI_FLAG, 'ls'], false)).toBeUndefined();
    expect(cliArgv(['/opt/app/factory-in-a-box', `${CLI_FLAG}=ls`], false)).toBeUndefined();
    // From a checkout the app path comes first: the flag in its place is not the flag.
    expect(cliArgv(['/usr/lib/electron', CLI_FLAG, 'ls'], true)).toBeUndefined();
  });
});

describe('electronMode: the CLI, the headless host the CLI starts, or the app', () => {
  it('routes on the first argument only', () => {
    expect(electronMode(['/opt/app/factory-in-a-box', CLI_FLAG, '--', 'ls'], false)).toEqual({ mode: 'cli', args: ['ls'] });
    expect(electronMode(['/opt/app/factory-in-a-box', HEADLESS_FLAG], false)).toEqual({ mode: 'headless' });
    expect(electronMode(['/usr/lib/electron', '.', HEADLESS_FLAG], true)).toEqual({ mode: 'headless' });
    expect(electronMode(['/opt/app/factory-in-a-box'], false)).toEqual({ mode: 'window' });
    // The CLI's own words never make it the headless host.
    expect(electronMode(['/opt/app/factory-in-a-box', CLI_FLAG, '--', HEADLESS_FLAG], false)).toEqual({ mode: 'cli', args: [HEADLESS_FLAG] });
    expect(electronMode(['/opt/app/factory-in-a-box', 'ls', HEADLESS_FLAG], false)).toEqual({ mode: 'window' });
  });

  it('the CLI inside the packaged app starts the app binary as the headless host, in the data dir (not inside app.asar)', () => {
    expect(headlessCommand({ execPath: '/opt/Factory in a Box/factory-in-a-box', platform: 'linux', defaultApp: false })).toEqual({ command: '/opt/Factory in a Box/factory-in-a-box', args: [...DISPLAYLESS_SWITCHES, HEADLESS_FLAG], inDataDir: true });
    expect(headlessCommand({ execPath: '/usr/lib/electron', platform: 'linux', defaultApp: true, appPath: '/src/factory' })).toEqual({ command: '/usr/lib/electron', args: ['/src/factory', ...DISPLAYLESS_SWITCHES, HEADLESS_FLAG], inDataDir: true });
    expect(headlessCommand({ execPath: '/Applications/Factory in a Box.app/Contents/MacOS/Factory in a Box', platform: 'darwin', defaultApp: false }).args).toEqual([HEADLESS_FLAG]);
    // What it starts is the headless host, as the Electron entry routes it.
    const linux = headlessCommand({ execPath: '/opt/app/factory-in-a-box', platform: 'linux', defaultApp: false });
    expect(electronMode([linux.command, ...linux.args], false)).toEqual({ mode: 'headless' });
    // Under Node (a clone, npm link): the web host's entry, as before.
    const node = headlessCommand(undefined);
    expect(node.command).toBe(process.execPath);
    expect(node.args.at(-1)).toBe('--headless');
    expect(node.inDataDir).toBeUndefined();
  });
});

describe('the launcher script', () => {
  it('runs the app binary next to it as the CLI, every word as the user typed it', () => {
    const { launcher } = linuxInstall();
    const r = run(launcher, HOSTILE);
    expect(r.status).toBe(0);
    expect(r.argv).toEqual([...LINUX, ...HOSTILE]);
    expect(cliArgv(['bin', ...r.argv], false)).toEqual(HOSTILE);
  });

  it('finds the app through a link on PATH (as the deb links it into /usr/bin), in a folder with spaces', () => {
    const { launcher } = linuxInstall();
    const bin = path.join(scratch(), 'bin');
    fs.mkdirSync(bin);
    fs.symlinkSync(launcher, path.join(bin, 'factory'));
    const r = spawnSync('sh', ['-c', 'factory show "a b"'], { encoding: 'utf8', env: { PATH: `${bin}:${process.env.PATH}` } });
    expect(r.status).toBe(0);
    expect(r.stdout.split('\0').slice(0, -1)).toEqual([...LINUX, 'show', 'a b']);
  });

  it('passes the CLI\'s exit status through', () => {
    const { launcher } = linuxInstall();
    expect(run(launcher, ['exec', 't1', '--', 'false'], { STANDIN_EXIT: '7' }).status).toBe(7);
  });

  it('finds the binary in a macOS bundle (Contents/Resources next to Contents/MacOS)', () => {
    const contents = path.join(scratch(), 'Factory in a Box.app', 'Contents');
    standIn(path.join(contents, 'MacOS', 'Factory in a Box'));
    const launcher = path.join(contents, 'Resources', 'factory');
    fs.mkdirSync(path.dirname(launcher), { recursive: true });
    fs.copyFileSync(LAUNCHER, launcher);
    fs.chmodSync(launcher, 0o755);
    expect(run(launcher, ['ls']).argv).toEqual([CLI_FLAG, '--', 'ls']);
  });

  it('says where it looked, with exit 127, when no app is next to it (a copy taken out of the app)', () => {
    const lone = path.join(scratch(), 'factory');
    fs.copyFileSync(LAUNCHER, lone);
    fs.chmodSync(lone, 0o755);
    const r = run(lone, ['ls']);
    expect(r.status).toBe(127);
    expect(r.stderr).toContain(`factory: the Factory in a Box app was not found next to ${lone}`);
  });

  it('does not take a directory named like the binary for the app', () => {
    const { app, launcher } = linuxInstall();
    fs.rmSync(path.join(app, 'factory-in-a-box'));
    fs.mkdirSync(path.join(app, 'factory-in-a-box'));
    expect(run(launcher, ['ls']).status).toBe(127);
  });
});

describe('cliInstall: the command Settings shows', () => {
  it('packaged: an ln -s of the launcher into ~/.local/bin, which a real bash runs', () => {
    const { launcher } = linuxInstall();
    const info = cliInstall({ resourcesPath: path.dirname(launcher) });
    expect(info).toMatchObject({ how: 'packaged', launcherPath: launcher, onPath: false });
    const home = scratch();
    const r = spawnSync('bash', ['-c', info.command], { encoding: 'utf8', env: { PATH: process.env.PATH, HOME: home } });
    expect(r.status, r.stderr).toBe(0);
    expect(fs.readlinkSync(path.join(home, '.local/bin/factory'))).toBe(launcher);
    expect(run(path.join(home, '.local/bin/factory'), ['ls']).argv).toEqual([...LINUX, 'ls']);
  });

  it('packaged and already linked on PATH (the deb\'s /usr/bin/factory): says so', () => {
    const { launcher } = linuxInstall();
    const bin = path.join(scratch(), 'bin');
    fs.mkdirSync(bin);
    expect(cliInstall({ resourcesPath: path.dirname(launcher), pathDirs: [bin] }).onPath).toBe(false);
    fs.symlinkSync(launcher, path.join(bin, 'factory'));
    // A relative PATH entry is not trusted to mean the same place everywhere.
    expect(cliInstall({ resourcesPath: path.dirname(launcher), pathDirs: ['bin'] }).onPath).toBe(false);
    expect(cliInstall({ resourcesPath: path.dirname(launcher), pathDirs: ['/nonexistent', bin] }).onPath).toBe(true);
  });

  it('AppImage: a script that runs the AppImage file as the CLI, quoted for a hostile file name', () => {
    const image = path.join(scratch(), "Apps $(touch pwned) it's", 'Factory in a Box.AppImage');
    standIn(image);
    const info = cliInstall({ resourcesPath: '/tmp/.mount_Factory/resources', appImage: image });
    expect(info.how).toBe('appimage');
    const home = scratch();
    const r = spawnSync('bash', ['-c', info.command], { encoding: 'utf8', cwd: home, env: { PATH: process.env.PATH, HOME: home } });
    expect(r.status, r.stderr).toBe(0);
    expect(fs.existsSync(path.join(home, 'pwned'))).toBe(false);
    expect(run(path.join(home, '.local/bin/factory'), HOSTILE).argv).toEqual([...LINUX, ...HOSTILE]);
  });

  it('from a clone or the web host: npm\'s way', () => {
    expect(cliInstall({})).toEqual({ how: 'source', onPath: false, command: FROM_SOURCE });
  });
});
