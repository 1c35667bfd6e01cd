// What Settings does with a sandbox host before it is used (issue 14): check a
// draft (log in only once its host key is verified, then ask libvirt there what
// it offers), save it with the host key the user confirmed (it must be the one
// the host presents right now), remove it while nothing runs there.
import { readFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { FactoryError } from '../../common/errors.js';
import type { HostCheckResult, HostDraft, SandboxHostSetting } from '../../common/sandbox-hosts.js';
import { LibvirtSandboxDriver } from './libvirt-sandbox-driver.js';
import { readUserKnownHosts } from './known-hosts.js';
import { SshHost, type SshHostTarget } from './ssh-host.js';

/** Where a host's login and trust come from on the user's machine (tests give their own). */
export interface HostAccess {
  /** Reads a private key file. */
  readKey?: (file: string) => Promise<string>;
  /** The user's SSH agent socket; default SSH_AUTH_SOCK. */
  agentSocket?: () => string | undefined;
  /** The user's known_hosts text; default ~/.ssh/known_hosts. */
  knownHosts?: () => Promise<string>;
  readyTimeoutMs?: number;
}

const MAX_KEY_FILE = 64 * 1024;

async function readKeyFile(file: string): Promise<string> {
  const text = await readFile(file, 'utf8').catch((err: NodeJS.ErrnoException) => {
    throw new FactoryError('InvalidInput', `keyFile: cannot read the private key file ${JSON.stringify(file)} (${err.code ?? err.message})`);
  });
  if (text.length > MAX_KEY_FILE || !/-----BEGIN [A-Z ]*PRIVATE KEY-----/.test(text)) {
    throw new FactoryError('InvalidInput', `keyFile: ${JSON.stringify(file)} is not a private key file (OpenSSH or PEM)`);
  }
  return text;
}

/** The SSH target of a host: its key from the file or the agent, its pin, and known_hosts when not pinned. */
export async function sshTargetOf(host: HostDraft & { hostKeyFingerprint?: string | undefined }, access: HostAccess = {}): Promise<SshHostTarget> {
  const at = host.destination.lastIndexOf('@');
  const target: SshHostTarget = {
    name: host.name,
    host: host.destination.slice(at + 1).replace(/^\[(.*)\]$/, '$1'),
    port: host.port,
    username: host.destination.slice(0, at),
    ...(access.readyTimeoutMs ? { readyTimeoutMs: access.readyTimeoutMs } : {}),
  };
  if (host.keySource === 'agent') {
    const agent = (access.agentSocket ?? (() => process.env.SSH_AUTH_SOCK))();
    if (!agent) throw new FactoryError('InvalidInput', 'keySource: no SSH agent is running for this app (SSH_AUTH_SOCK is not set); start one with ssh-agent and ssh-add, or use a key file');
    target.agent = agent;
  } else {
    const file = (host.keyFile ?? '').replace(/^~\//, `${os.homedir()}${path.sep}`);
    target.privateKey = await (access.readKey ?? readKeyFile)(file);
  }
  if (host.hostKeyFingerprint) target.hostKeyFingerprint = host.hostKeyFingerprint;
  else target.knownHosts = await (access.knownHosts ?? (() => readUserKnownHosts()))();
  return target;
}

/**
 * Connects with the draft: an unverified host key comes back as its fingerprint and nothing else
 * (no login, nothing run there); a changed one is refused loudly; a verified one gets the facts.
 */
export async function checkHostDraft(draft: HostDraft & { hostKeyFingerprint?: string | undefined }, access: HostAccess = {}): Promise<HostCheckResult> {
  const target = await sshTargetOf(draft, access);
  let conn: SshHost;
  try {
    conn = await SshHost.connect(target);
  } catch (err) {
    const e = err as FactoryError;
    if (e.name === 'RemoteHostKeyUnknown' && e.detail) return { fingerprint: e.detail, hostKey: 'unverified' };
    throw err;
  }
  try {
    const driver = new LibvirtSandboxDriver({ hostName: draft.name, storageDir: draft.storageDir, virtType: draft.virtType, connect: async () => conn });
    const facts = await driver.checkHost();
    return {
      fingerprint: conn.presentedFingerprint ?? '',
      hostKey: conn.verifiedBy,
      facts: { ...(facts.qemu ? { qemu: facts.qemu } : {}), kvm: facts.kvm, freeBytes: facts.freeBytes, problems: facts.problems },
    };
  } finally {
    conn.close();
  }
}

/**
 * The setting to store for a host the user saves: the fingerprint they confirmed must be the
 * one the host presents now (a connection proves it, and that the login works). An edit that
 * keeps the address and the pin does not connect (the host may be down while its capacity changes).
 */
export async function hostToSave(draft: HostDraft, confirmed: string, previous: SandboxHostSetting | undefined, access: HostAccess = {}): Promise<SandboxHostSetting> {
  const setting: SandboxHostSetting = { ...draft, hostKeyFingerprint: confirmed };
  const samePlace = previous && previous.destination === draft.destination && previous.port === draft.port && previous.hostKeyFingerprint === confirmed;
  if (samePlace) return setting;
  const target = await sshTargetOf(setting, access);
  const conn = await SshHost.connect(target).catch((err: FactoryError) => {
    if (err.name === 'RemoteHostKeyChanged' && err.detail) {
      throw new FactoryError('RemoteHostKeyChanged', `hostKeyFingerprint: the host key you confirmed (${confirmed}) is not the one ${draft.destination} presents now (${err.detail}); check it again before trusting it`);
    }
    throw err;
  });
  conn.close();
  return setting;
}
