// The configured sandbox hosts with their live state, asked again every few
// seconds (a host that drops shows as lost) and after every change.
import { useCallback, useEffect, useState } from 'react';
import type { SandboxHostView } from '../../../common/sandbox-hosts.js';
import { useController } from '../../state/context.js';

export function useSandboxHosts(pollMs = 5000): { hosts: SandboxHostView[] | undefined; refresh: () => Promise<void>; set: (h: SandboxHostView[]) => void } {
  const controller = useController();
  const [hosts, setHosts] = useState<SandboxHostView[]>();
  const refresh = useCallback(async () => {
    // An older host without the hosts API: no hosts.
    setHosts(await controller.bridge.call('hosts.list', {}).catch(() => []));
  }, [controller]);
  useEffect(() => {
    void refresh();
    const t = setInterval(() => void refresh(), pollMs);
    return () => clearInterval(t);
  }, [refresh, pollMs]);
  return { hosts, refresh, set: setHosts };
}

/** How a host's state reads in a list or the header. */
export function hostState(h: SandboxHostView): 'connected' | 'lost' | 'not connected' {
  return h.lost ? 'lost' : h.connected ? 'connected' : 'not connected';
}
