// A git smart-HTTP server: node's HTTPS server running `git http-backend` as a
// CGI per request, requiring basic auth with one user/token. Push is enabled
// (http.receivepack) so the proxy's push policy, not the server, is what a test
// observes refusing a push.
import { execFile, execFileSync, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startHttpsServer, type TestCa, type TestHttpsServer } from './https.js';

export interface GitServer extends TestHttpsServer {
  root: string;
  /** https://localhost:PORT/<name>.git */
  repoUrl(name: string): string;
  /** The Authorization headers the server received, in order. */
  authSeen: string[];
  /** Creates a bare repository with one commit on main. Returns its path. */
  createRepo(name: string, files?: Record<string, string>): string;
  refs(name: string): Record<string, string>;
  dispose(): Promise<void>;
}

const GIT_ENV = {
  GIT_CONFIG_NOSYSTEM: '1',
  GIT_TERMINAL_PROMPT: '0',
  GIT_AUTHOR_NAME: 'Test',
  GIT_AUTHOR_EMAIL: 'test@example.invalid',
  GIT_COMMITTER_NAME: 'Test',
  GIT_COMMITTER_EMAIL: 'test@example.invalid',
};

/** Async git, for anything that talks to a server in this same process (sync would block its event loop). */
export function gitAsync(args: string[], cwd: string, env: NodeJS.ProcessEnv = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile('git', args, { cwd, env: { ...process.env, ...GIT_ENV, ...env }, encoding: 'utf8', timeout: 60_000 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`git ${args.join(' ')} failed: ${stderr || err.message}`));
      else resolve(stdout);
    });
  });
}

export function git(args: string[], cwd: string, env: NodeJS.ProcessEnv = {}): string {
  return execFileSync('git', args, { cwd, env: { ...process.env, ...GIT_ENV, ...env }, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 60_000 });
}

export async function startGitServer(ca: TestCa, auth: { user: string; token: string }): Promise<GitServer> {
  const root = mkdtempSync(path.join(os.tmpdir(), 'fiab-git-'));
  const expected = `Basic ${Buffer.from(`${auth.user}:${auth.token}`).toString('base64')}`;
  const authSeen: string[] = [];
  const server = await startHttpsServer(ca, (req, res) => {
    const header = req.headers.authorization ?? '';
    authSeen.push(header);
    if (header !== expected) {
      res.writeHead(401, { 'www-authenticate': 'Basic realm="test git"', 'content-type': 'text/plain' });
      res.end('authentication required\n');
      req.resume();
      return;
    }
    const url = new URL(req.url ?? '/', 'https://localhost');
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      GIT_PROJECT_ROOT: root,
      GIT_HTTP_EXPORT_ALL: '1',
      REQUEST_METHOD: req.method ?? 'GET',
      PATH_INFO: decodeURIComponent(url.pathname),
      QUERY_STRING: url.search.slice(1),
      CONTENT_TYPE: req.headers['content-type'] ?? '',
      REMOTE_USER: auth.user,
      REMOTE_ADDR: '127.0.0.1',
      GATEWAY_INTERFACE: 'CGI/1.1',
      ...(req.headers['content-length'] ? { CONTENT_LENGTH: req.headers['content-length'] } : {}),
      ...(req.headers['content-encoding'] ? { HTTP_CONTENT_ENCODING: String(req.headers['content-encoding']) } : {}),
      ...(req.headers['git-protocol'] ? { GIT_PROTOCOL: String(req.headers['git-protocol']) } : {}),
    };
    const cgi = spawn('git', ['http-backend'], { env, stdio: ['pipe', 'pipe', 'ignore'] });
    req.pipe(cgi.stdin);
    cgi.stdin.on('error', () => undefined);
    let head = Buffer.alloc(0);
    let headersDone = false;
    cgi.stdout.on('data', (chunk: Buffer) => {
      if (headersDone) {
        res.write(chunk);
        return;
      }
      head = Buffer.concat([head, chunk]);
      let end = head.indexOf('\r\n\r\n');
      let sepLen = 4;
      if (end < 0) {
        end = head.indexOf('\n\n');
        sepLen = 2;
      }
      if (end < 0) return;
      headersDone = true;
      let status = 200;
      const headers: Record<string, string> = {};
      for (const line of head.subarray(0, end).toString('latin1').split(/\r?\n/)) {
        const i = line.indexOf(':');
        if (i < 0) continue;
        const name = line.slice(0, i).trim();
        const value = line.slice(i + 1).trim();
        if (name.toLowerCase() === 'status') status = parseInt(value, 10);
        else headers[name] = value;
      }
      res.writeHead(status, headers);
      const rest = head.subarray(end + sepLen);
      if (rest.length) res.write(rest);
    });
    cgi.on('close', () => res.end());
  });
  const createRepo = (name: string, files: Record<string, string> = { 'README.md': '# fixture\n' }) => {
    const work = mkdtempSync(path.join(os.tmpdir(), 'fiab-gitwork-'));
    git(['init', '-q', '-b', 'main'], work);
    for (const [f, content] of Object.entries(files)) {
      mkdirSync(path.dirname(path.join(work, f)), { recursive: true });
      writeFileSync(path.join(work, f), content);
    }
    git(['add', '.'], work);
    git(['commit', '-q', '-m', 'fixture'], work);
    const bare = path.join(root, `${name}.git`);
    git(['clone', '-q', '--bare', work, bare], root);
    git(['config', 'http.receivepack', 'true'], bare);
    rmSync(work, { recursive: true, force: true });
    return bare;
  };
  const refs = (name: string) => {
    const out = git(['for-each-ref', '--format=%(refname) %(objectname)'], path.join(root, `${name}.git`));
    return Object.fromEntries(out.trim().split('\n').filter(Boolean).map((l) => l.split(' ') as [string, string]));
  };
  return Object.assign(server, {
    root,
    authSeen,
    repoUrl: (name: string) => `${server.url}/${name}.git`,
    createRepo,
    refs,
    dispose: async () => {
      await server.close();
      rmSync(root, { recursive: true, force: true });
    },
  });
}
