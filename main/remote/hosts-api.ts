// The hosts.* API (common/contract.ts) over Settings and the live hosts:
// list with status, check a draft, save with the confirmed host key, remove,
// and a draft's fields from an alias of the user's SSH config.
import type { FactoryApi } from '../../common/contract.js';
import { FactoryError } from '../../common/errors.js';
import type { Task } from '../../common/domain.js';
import type { SandboxHostSetting, SandboxHostView } from '../../common/sandbox-hosts.js';
import type { Settings } from '../state/settings.js';
import { checkHostDraft, hostToSave, type HostAccess } from './host-check.js';
import type { SandboxHosts } from './sandbox-hosts.js';
import { hostFromSshConfig, type SshConfigAccess } from './ssh-config.js';

type HostsApi = Pick<FactoryApi, 'hosts.list' | 'hosts.check' | 'hosts.save' | 'hosts.remove' | 'hosts.fromSshConfig'>;

export interface HostsApiDeps {
  settings: { get(): Settings; set(patch: Partial<Settings>): Settings };
  hosts: SandboxHosts;
  tasks: () => Task[];
  access?: HostAccess;
  /** Where hosts.fromSshConfig reads the user's SSH config (tests give their own file). */
  sshConfig?: SshConfigAccess;
}

const ACTIVE = new Set(['booting', 'running', 'stopping']);

/** The tasks whose sandbox runs on the host now (by title, for a message). */
function tasksOn(deps: HostsApiDeps, name: string): Task[] {
  return deps.tasks().filter((t) => (t.sandbox?.host ?? deps.hosts.hostOf(t.id)) === name && ACTIVE.has(t.sandbox?.status ?? 'none'));
}

function refuseWhileRunning(deps: HostsApiDeps, name: string, doing: string): void {
  const running = tasksOn(deps, name);
  const count = Math.max(running.length, deps.hosts.status().find((s) => s.name === name)?.running ?? 0);
  if (count === 0) return;
  const which = running.map((t) => `${t.id} (${JSON.stringify(t.title.slice(0, 60))})`).join(', ');
  throw new FactoryError('InvalidInput', `cannot ${doing} sandbox host ${name}: ${count} sandbox${count === 1 ? '' : 'es'} run${count === 1 ? 's' : ''} there${which ? `: ${which}` : ''}; destroy ${count === 1 ? 'it' : 'them'} first`);
}

export function hostsApi(deps: HostsApiDeps): HostsApi {
  const list = (): SandboxHostView[] => {
    const live = new Map(deps.hosts.status().map((s) => [s.name, s]));
    return deps.settings.get().sandboxHosts.map((h) => {
      const s = live.get(h.name);
      return {
        name: h.name,
        destination: h.destination,
        port: h.port,
        keySource: h.keySource,
        ...(h.keyFile ? { keyFile: h.keyFile } : {}),
        capacity: h.capacity,
        storageDir: h.storageDir,
        virtType: h.virtType,
        ...(h.hostKeyFingerprint ? { hostKeyFingerprint: h.hostKeyFingerprint } : {}),
        connected: s?.connected ?? false,
        lost: s?.lost ?? false,
        running: s?.running ?? 0,
        ...(s?.error ? { error: s.error } : {}),
      };
    });
  };
  return {
    'hosts.list': async () => list(),
    'hosts.check': async (draft) => checkHostDraft(draft as Parameters<typeof checkHostDraft>[0], deps.access),
    'hosts.save': async (input) => {
      const { previousName, hostKeyFingerprint, ...draft } = input as typeof input & SandboxHostSetting;
      const hosts = deps.settings.get().sandboxHosts;
      const editing = previousName ?? draft.name;
      const previous = hosts.find((h) => h.name === editing);
      if (previousName && !previous) throw new FactoryError('InvalidInput', `previousName: there is no sandbox host named ${JSON.stringify(previousName)} to change`);
      if (draft.name !== editing && hosts.some((h) => h.name === draft.name)) throw new FactoryError('InvalidInput', `name: a sandbox host named ${JSON.stringify(draft.name)} exists already`);
      if (!previous && hosts.length >= 32) throw new FactoryError('InvalidInput', 'name: at most 32 sandbox hosts');
      if (previous && (previous.name !== draft.name || previous.destination !== draft.destination || previous.port !== draft.port || previous.storageDir !== draft.storageDir)) {
        refuseWhileRunning(deps, previous.name, 'move or rename');
      }
      const setting = await hostToSave(draft as Parameters<typeof hostToSave>[0], hostKeyFingerprint as string, previous, deps.access);
      const next = previous ? hosts.map((h) => (h === previous ? setting : h)) : [...hosts, setting];
      deps.settings.set({ sandboxHosts: next });
      // Connect now, so the list shows the host's state (a failure shows there as its last error).
      void deps.hosts.connectAll();
      return list();
    },
    'hosts.fromSshConfig': async ({ alias }) => hostFromSshConfig(alias, { ...(deps.access?.agentSocket ? { agentSocket: deps.access.agentSocket } : {}), ...deps.sshConfig }),
    'hosts.remove': async ({ name }) => {
      const hosts = deps.settings.get().sandboxHosts;
      if (!hosts.some((h) => h.name === name)) throw new FactoryError('InvalidInput', `name: there is no sandbox host named ${JSON.stringify(name)}`);
      refuseWhileRunning(deps, name, 'remove');
      deps.settings.set({ sandboxHosts: hosts.filter((h) => h.name !== name) });
      deps.hosts.forget(name);
      return list();
    },
  };
}
