// Wraps the preload's window.factory: errors cross contextBridge as plain
// Errors carrying only a message, so the preload puts the wire error in it and
// this adapter rebuilds a named FactoryError (name, message, detail).
import { FactoryError, type FactoryBridge } from '../../common/contract.js';

export const WIRE_ERROR_PREFIX = 'factory-wire-error:';

export function reviveError(err: unknown): unknown {
  const message = err instanceof Error ? err.message : typeof err === 'string' ? err : '';
  const at = message.indexOf(WIRE_ERROR_PREFIX);
  if (at < 0) return err;
  try {
    const wire = JSON.parse(message.slice(at + WIRE_ERROR_PREFIX.length)) as { name?: unknown; message?: unknown; detail?: unknown };
    return new FactoryError(
      typeof wire.name === 'string' ? wire.name : 'Error',
      typeof wire.message === 'string' ? wire.message : 'unknown error',
      typeof wire.detail === 'string' ? wire.detail : undefined,
    );
  } catch {
    return err;
  }
}

export function electronBridge(raw: FactoryBridge): FactoryBridge {
  return {
    call: (method, input) => raw.call(method, input).catch((err: unknown) => Promise.reject(reviveError(err))),
    onEvent: (l) => raw.onEvent(l),
    onTerminalData: (l) => raw.onTerminalData(l),
    ...(raw.pathForFile ? { pathForFile: (file: File) => raw.pathForFile!(file) } : {}),
  };
}
