// Where a task's sandbox runs: 'local', a named sandbox host, or 'any' — the
// least loaded by running sandboxes against capacity, among hosts that answer
// and have room. A pure function; the counts come from the drivers.

export interface PlacementCandidate {
  name: string;
  running: number;
  capacity: number;
  /** Connected, or connectable right now. */
  reachable: boolean;
}

export function placeSandbox(request: string | undefined, hosts: PlacementCandidate[], local: { running: number; capacity: number }): string {
  const asked = request ?? 'local';
  if (asked === 'local') return 'local';
  if (asked !== 'any') {
    if (!hosts.some((h) => h.name === asked)) throw new Error(`there is no sandbox host named ${JSON.stringify(asked)} in Settings`);
    return asked;
  }
  const load = (running: number, capacity: number) => running / Math.max(capacity, 1);
  const open = hosts.filter((h) => h.reachable && h.running < h.capacity);
  // A remote host wins a tie: taking load off this machine is why it was added.
  const best = open.sort((a, b) => load(a.running, a.capacity) - load(b.running, b.capacity))[0];
  if (best && load(best.running, best.capacity) <= load(local.running, local.capacity)) return best.name;
  return 'local';
}
