// Where the app of a data folder listens for its clients (the factory CLI): a
// unix socket in the data folder, served by main/host/socket/socket-host.ts.
import path from 'node:path';

export const SOCKET_FILE = 'factory.sock';

export function socketPath(dataDir: string): string {
  return path.join(dataDir, SOCKET_FILE);
}
