// The default egress rules as this machine's network needs them. Here the
// resolver maps the registries (npm, Debian) to a gateway in a reserved range,
// which the proxy's address guard refuses like any private address; a user on
// such a network (or with a LAN mirror) adds the range to the rule in Settings.
// This does the same, for exactly the addresses each rule's host resolves to now.
import dns from 'node:dns';
import { defaultEgressRules, type EgressRule } from '../../common/egress.js';
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
