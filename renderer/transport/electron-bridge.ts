// Wraps the preload's window.factory: errors cross contextBridge as plain
// Errors carrying only a message, so the preload puts the wire error in it and
// this adapter rebuilds a named FactoryError (name, message, detail).
import { WIRE_ERROR_PREFIX, type ElectronBridge } from '../../common/bridge.js';
import { FactoryError } from '../../common/errors.js';

export { WIRE_ERROR_PREFIX };

export function reviveError(err: unknown): unknown {
  const message = err instanceof Error ? err.message : typeof err === 'string' ? err : '';
  const at = message.indexOf(WIRE_ERROR_PREFIX);
  if (at < 0) return err;
  try {
    const wire = JSON.parse(message.slice(at + WIRE_ERROR_PREFIX.length)) as { name?: unknown; message?: unknown; detail?: unknown };
    return FactoryError.carried(
      typeof wire.name === 'string' ? wire.name : 'Error',
      typeof wire.message === 'string' ? wire.message : 'unknown error',
      typeof wire.detail === 'string' ? wire.detail : undefined,
    );
  } catch {
    return err;
  }
}

/**
 * The renderer's view of the preload's bridge. Typed as ElectronBridge (every
 * member required), so leaving one out here, as once happened to the folder
 * picker and the tray's "New task…", does not compile.
 */
export function electronBridge(raw: ElectronBridge): ElectronBridge {
  return {
    call: (method, input) => raw.call(method, input).catch((err: unknown) => Promise.reject(reviveError(err))),
    onEvent: (l) => raw.onEvent(l),
    onTerminalData: (l) => raw.onTerminalData(l),
    pathForFile: (file) => raw.pathForFile(file),
    pickRepoFolder: () => raw.pickRepoFolder().catch((err: unknown) => Promise.reject(reviveError(err))),
    onNewTaskRequest: (l) => raw.onNewTaskRequest(l),
  };
}
