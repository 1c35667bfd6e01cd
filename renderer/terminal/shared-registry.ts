// One terminal registry per bridge, so every view of a session shares its
// xterm.js instance; in the e2e build, read-only hooks for the tests.
import type { FactoryBridge } from '../../common/contract.js';
import type { TerminalRegistryOptions } from './registry-options.js';
import { TerminalRegistry } from './terminal-registry.js';

/**
 * Replaced at build time by vite.config.ts: true only in the end-to-end test
 * build (`vite build --mode e2e`), false in the production build, where the
 * hook below is then removed as dead code. Undefined under vitest.
 */
declare const __FACTORY_E2E_HOOKS__: boolean | undefined;

/** One registry per bridge, so every view of a session shares its instance. */
const registries = new WeakMap<FactoryBridge, TerminalRegistry>();

export function terminalRegistryFor(bridge: FactoryBridge, options?: Partial<TerminalRegistryOptions>): TerminalRegistry {
  let r = registries.get(bridge);
  if (!r) {
    r = new TerminalRegistry(bridge, options);
    registries.set(bridge, r);
    if (typeof __FACTORY_E2E_HOOKS__ !== 'undefined' && __FACTORY_E2E_HOOKS__) exposeForTests(r);
  }
  return r;
}

/**
 * Read-only hooks for end-to-end tests, in the e2e build only: the text of a
 * terminal (WebGL draws to a canvas, so the DOM has no text to read) and which
 * renderer it uses. A shipped app must not hand every page script its terminals.
 */
function exposeForTests(r: TerminalRegistry): void {
  if (typeof window === 'undefined') return;
  (window as unknown as { __factoryTerminals?: unknown }).__factoryTerminals = {
    text: (id: string) => r.text(id),
    tail: (id: string, rows: number) => r.tail(id, rows),
    renderer: (id: string) => r.snapshot(id)?.renderer ?? null,
    sessions: () => r.sessions(),
  };
}
