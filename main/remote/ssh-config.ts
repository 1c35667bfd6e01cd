// A sandbox host from the user's own SSH config: `ssh -G <alias>` (OpenSSH's
// own reading of ~/.ssh/config, Include and Match rules and all; it connects
// nowhere) gives the address, user, port and key files the alias stands for,
// and Settings' host form is filled with them. The app's SSH client does not
// read the config itself, so what it cannot follow (a jump host, a proxy
// command) is refused here by name rather than silently bypassed.
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { FactoryError } from '../../common/errors.js';
import { HostDestination, type SshConfigHost } from '../../common/sandbox-hosts.js';

/** What ssh -G printed: each keyword (lowercase) with its values in order. */
export function parseSshG(text: string): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const line of text.split('\n')) {
    const m = /^([a-z0-9]+) (.*)$/.exec(line.trim());
    if (!m) continue;
    out.set(m[1]!, [...(out.get(m[1]!) ?? []), m[2]!]);
  }
  return out;
}

/**
 * The host form's fields for an alias, from ssh -G's output. The first key file
 * that exists is used; with none, the agent when one runs. A jump host or proxy
 * command is refused (the app connects directly).
 */
export function hostFromSshG(alias: string, config: Map<string, string[]>, opts: { exists: (file: string) => boolean; agent: boolean; home: string }): SshConfigHost {
  const one = (k: string) => config.get(k)?.[0];
  for (const k of ['proxyjump', 'proxycommand']) {
    const v = one(k);
    if (v && v !== 'none') {
      throw new FactoryError('InvalidInput', `alias: ${alias} goes through ${k === 'proxyjump' ? 'a jump host' : 'a proxy command'} (${k === 'proxyjump' ? 'ProxyJump' : 'ProxyCommand'} in your SSH config), which the app's SSH connection cannot follow; add a host the app can reach directly`);
    }
  }
  const hostname = one('hostname');
  const user = one('user');
  if (!hostname || !user) throw new FactoryError('InvalidInput', `alias: ssh -G ${alias} named no host name or user`);
  const host = hostname.includes(':') ? `[${hostname}]` : hostname;
  const destination = `${user}@${host}`;
  const checked = HostDestination.safeParse(destination);
  if (!checked.success) throw new FactoryError('InvalidInput', `alias: ${alias} stands for ${JSON.stringify(destination).slice(0, 300)}, which ${checked.error.issues[0]?.message ?? 'is not a usable destination'}`);
  const port = Number(one('port') ?? 22);
  if (!Number.isInteger(port) || port < 1 || port > 65535) throw new FactoryError('InvalidInput', `alias: ${alias} has port ${JSON.stringify(one('port'))}`);
  const expand = (f: string) => (f.startsWith('~/') ? path.join(opts.home, f.slice(2)) : f);
  const keyFile = (config.get('identityfile') ?? []).map(expand).find((f) => path.isAbsolute(f) && opts.exists(f));
  if (keyFile) return { destination, port, keySource: 'file', keyFile };
  return { destination, port, keySource: opts.agent ? 'agent' : 'file' };
}

export interface SshConfigAccess {
  /** The config file to read instead of the user's (ssh -F); tests give their own. */
  file?: string;
  /** The user's SSH agent socket; default SSH_AUTH_SOCK. */
  agentSocket?: () => string | undefined;
}

/** Runs ssh -G for an alias (checked: a plain name) and fills the host form from it. */
export async function hostFromSshConfig(alias: string, access: SshConfigAccess = {}): Promise<SshConfigHost> {
  const args = ['-G', ...(access.file ? ['-F', access.file] : []), '--', alias];
  const text = await new Promise<string>((resolve, reject) => {
    execFile('ssh', args, { timeout: 10_000, maxBuffer: 256 * 1024, env: { ...process.env, LC_ALL: 'C' } }, (err, stdout, stderr) => {
      if (!err) return resolve(stdout);
      const why = (stderr || err.message).trim().split('\n').slice(-2).join(' / ').replace(/[^\x20-\x7e]/g, '?').slice(0, 300);
      reject(new FactoryError('InvalidInput', `alias: ssh -G ${alias} failed: ${why}`));
    });
  });
  const agent = !!(access.agentSocket ?? (() => process.env.SSH_AUTH_SOCK))();
  return hostFromSshG(alias, parseSshG(text), { exists: existsSync, agent, home: os.homedir() });
}
