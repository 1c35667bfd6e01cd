// The setup of a sandbox as bash scripts, one per visible step: the proxy
// settings of every tool that ignores HTTP(S)_PROXY, Debian packages, Node, the
// repository's root commands, then the project's own install as the agent user.
// Every value that came from the repository is validated before a script is made
// and shell-quoted inside it; the repository's commands run as they are, but only
// ever in the guest and each as one quoted word (`bash -c '<command>'`), so no
// command can change the script around it.
import { shellQuote } from '../../common/shell-quote.js';
import { FactoryError } from '../../common/contract.js';
import { GUEST_REPO_DIR } from '../guest/guest-shell.js';
import { DEBIAN_PACKAGE_NAME } from './env-schema.js';
import type { PackageDist } from './node-version.js';

export interface SetupStep {
  name: string;
  user: 'root' | 'agent';
  script: string;
  /** One line for the terminal and the board: what this step does. */
  display: string;
  timeoutSeconds: number;
}

/** The proxy address the guest reaches the host's credential/egress proxy at. */
export const GUEST_PROXY_URL = 'http://10.0.2.100:80';
export const GUEST_NO_PROXY = '10.0.2.100,localhost,127.0.0.1';

export interface SetupCommand {
  /** Where it came from, shown before it runs: "postCreateCommand", "environment.setup[1]", "npm ci". */
  label: string;
  /** A shell line (already quoted where it needs to be). */
  line: string;
}

export interface SetupInput {
  debianPackages: string[];
  node?: { version: string; dist: PackageDist; npm: PackageDist };
  rootCommands: SetupCommand[];
  agentCommands: SetupCommand[];
  env: Record<string, string>;
}

const HEADER = ['#!/bin/bash', 'set -euo pipefail'];

function say(message: string): string {
  return `printf '%s\\n' ${shellQuote(`==> ${message}`)}`;
}

function exports(env: Record<string, string>): string[] {
  return Object.entries(env).map(([k, v]) => {
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(k)) throw new FactoryError('InvalidInput', `environment variable name ${JSON.stringify(k).slice(0, 80)} is not a shell name`);
    return `export ${k}=${shellQuote(v)}`;
  });
}

const PROXY_ENV: Record<string, string> = {
  HTTP_PROXY: GUEST_PROXY_URL, HTTPS_PROXY: GUEST_PROXY_URL, http_proxy: GUEST_PROXY_URL, https_proxy: GUEST_PROXY_URL,
  NO_PROXY: GUEST_NO_PROXY, no_proxy: GUEST_NO_PROXY,
};

function script(lines: string[]): string {
  return [...HEADER, ...exports(PROXY_ENV), ...lines, ''].join('\n');
}

/** A sha512 SRI string as the hex sha512sum prints. */
export function sha512Hex(integrity: string): string {
  if (!/^sha512-[A-Za-z0-9+/]{86}==$/.test(integrity)) throw new FactoryError('InvalidData', `not a sha512 integrity: ${integrity.slice(0, 40)}`);
  return Buffer.from(integrity.slice(7), 'base64').toString('hex');
}

function proxyStep(): SetupStep {
  const apt = [`Acquire::http::Proxy "${GUEST_PROXY_URL}";`, `Acquire::https::Proxy "${GUEST_PROXY_URL}";`];
  // No update check or funding notice: one request less each run, and nothing to act on in a sandbox.
  const npmrc = [`proxy=${GUEST_PROXY_URL}`, `https-proxy=${GUEST_PROXY_URL}`, `noproxy=${GUEST_NO_PROXY}`, 'update-notifier=false', 'fund=false'];
  const lines = [
    say(`apt, npm, pip and git use the proxy at ${GUEST_PROXY_URL}`),
    'install -d -m 0755 /etc/apt/apt.conf.d /usr/local/etc',
    `printf '%s\\n' ${apt.map(shellQuote).join(' ')} > /etc/apt/apt.conf.d/80factory-proxy`,
    // npm's global config: /usr/local/etc/npmrc for the Node this setup installs, /etc/npmrc for Debian's npm.
    `for f in /usr/local/etc/npmrc /etc/npmrc; do printf '%s\\n' ${npmrc.map(shellQuote).join(' ')} > "$f"; done`,
    `printf '%s\\n' '[global]' ${shellQuote(`proxy = ${GUEST_PROXY_URL}`)} > /etc/pip.conf`,
    `git config --system http.proxy ${shellQuote(GUEST_PROXY_URL)}`,
  ];
  return { name: 'proxy settings', user: 'root', script: script(lines), display: `proxy settings for apt, npm, pip and git (${GUEST_PROXY_URL})`, timeoutSeconds: 60 };
}

function debianStep(packages: string[]): SetupStep {
  for (const p of packages) {
    // Checked again here: a name is the one repository value that reaches apt's command line.
    if (!DEBIAN_PACKAGE_NAME.test(p)) throw new FactoryError('InvalidInput', `not a Debian package name: ${JSON.stringify(p).slice(0, 80)}`);
  }
  const list = packages.map(shellQuote).join(' ');
  const lines = [
    'export DEBIAN_FRONTEND=noninteractive',
    say('apt-get update'),
    'apt-get update',
    say(`apt-get install ${packages.join(' ')}`),
    `apt-get install -y --no-install-recommends ${list}`,
  ];
  return { name: 'Debian packages', user: 'root', script: script(lines), display: `Debian: ${packages.join(' ')}`, timeoutSeconds: 1800 };
}

function fetchChecked(dist: PackageDist, file: string): string[] {
  return [
    say(`download ${dist.url}`),
    `curl --fail -sS --retry 3 -o "$tmp/${file}" ${shellQuote(dist.url)}`,
    `printf '%s  %s\\n' ${shellQuote(sha512Hex(dist.integrity))} "$tmp/${file}" | sha512sum --check --quiet -`,
  ];
}

function nodeStep(node: NonNullable<SetupInput['node']>): SetupStep {
  const lines = [
    'tmp=$(mktemp -d)',
    `trap 'rm -rf "$tmp"' EXIT`,
    ...fetchChecked(node.dist, 'node.tgz'),
    say('install /usr/local/bin/node and its headers'),
    'tar -xzf "$tmp/node.tgz" -C "$tmp" --no-same-owner package/bin/node package/include',
    'install -m 0755 "$tmp/package/bin/node" /usr/local/bin/node',
    'rm -rf /usr/local/include/node && install -d /usr/local/include && cp -R "$tmp/package/include/node" /usr/local/include/node',
    ...fetchChecked(node.npm, 'npm.tgz'),
    say(`install npm ${node.npm.version} in /usr/local/lib/node_modules/npm`),
    'rm -rf /usr/local/lib/node_modules/npm && install -d /usr/local/lib/node_modules/npm',
    'tar -xzf "$tmp/npm.tgz" -C /usr/local/lib/node_modules/npm --strip-components=1 --no-same-owner',
    'ln -sfn ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm',
    'ln -sfn ../lib/node_modules/npm/bin/npx-cli.js /usr/local/bin/npx',
    // node-gyp builds against these headers instead of downloading them (nodejs.org is not reachable).
    `printf '%s\\n' 'nodedir=/usr/local' >> /usr/local/etc/npmrc`,
    'printf "node %s, npm %s\\n" "$(/usr/local/bin/node --version)" "$(/usr/local/bin/npm --version)"',
  ];
  return { name: `Node ${node.version}`, user: 'root', script: script(lines), display: `Node ${node.version} with npm ${node.npm.version}`, timeoutSeconds: 900 };
}

function commandsScript(commands: SetupCommand[], env: Record<string, string>): string {
  const lines = [...exports(env), `cd ${shellQuote(GUEST_REPO_DIR)}`];
  for (const c of commands) lines.push(say(c.label), c.line);
  return script(lines);
}

/** The steps of a plan, in the order they run; none when there is nothing to set up. */
export function setupSteps(input: SetupInput): SetupStep[] {
  const work = input.debianPackages.length + input.rootCommands.length + input.agentCommands.length + (input.node ? 1 : 0);
  if (work === 0) return [];
  const steps = [proxyStep()];
  if (input.debianPackages.length > 0) steps.push(debianStep(input.debianPackages));
  if (input.node) steps.push(nodeStep(input.node));
  if (input.rootCommands.length > 0) {
    steps.push({
      name: 'root setup', user: 'root', script: commandsScript(input.rootCommands, input.env),
      display: input.rootCommands.map((c) => c.label).join(', '), timeoutSeconds: 1800,
    });
  }
  if (input.agentCommands.length > 0) {
    steps.push({
      name: 'project setup', user: 'agent', script: commandsScript(input.agentCommands, input.env),
      display: input.agentCommands.map((c) => c.label).join(', '), timeoutSeconds: 3600,
    });
  }
  return steps;
}

/** A repository's own command string as one line: run by bash, as one quoted word. */
export function bashCommand(command: string): string {
  return `bash -c ${shellQuote(command)}`;
}
