// The default egress rules as this machine's network needs them. Here the
// resolver maps the registries (npm, Debian) to a gateway in a reserved range,
// which the proxy's address guard refuses like any private address; a user on
// such a network (or with a LAN mirror) adds the range to the rule in Settings.
// This does the same, for exactly the addresses each rule's host resolves to now.
// And the hosts a sandbox reached, read back from its audit.
import dns from 'node:dns';
import { defaultEgressRules, type EgressRule } from '../../common/egress.js';
import type { FactoryApp } from '../../main/app.js';
import { forbiddenReason } from '../../main/credentials/net-guard.js';

export async function egressRulesForThisNetwork(rules: EgressRule[] = defaultEgressRules()): Promise<EgressRule[]> {
  return Promise.all(
    rules.map(async (rule) => {
      if (rule.host.startsWith('*.')) return rule;
      const answers = await dns.promises.lookup(rule.host, { all: true }).catch(() => []);
      const reserved = answers.filter((a) => forbiddenReason(a.address)).map((a) => `${a.address}/${a.family === 4 ? 32 : 128}`);
      return reserved.length ? { ...rule, addresses: reserved } : rule;
    }),
  );
}

/** The hosts a sandbox reached through the proxy, from its audit (refusals left out). */
export async function hostsReached(app: FactoryApp, sandboxId: string): Promise<string[]> {
  const audit = await app.api['audit.list']({ sandboxId });
  return audit.filter((e) => !e.rule.startsWith('refused') && e.host !== '(none)').map((e) => e.host);
}
