// ESLint rule: a promise's failure dropped on the floor must say why. It refuses
// `.catch(() => {})`, `.catch(() => undefined)` (and `null`, `void 0`, any
// parameters) whose result goes nowhere (a statement of its own, awaited or
// voided), unless a comment inside the handler, on the statement, or on the line
// just before it gives the reason. Where the result is used (assigned,
// returned, chained, passed on) the caller handles the missing value, so the
// catch is not silent. Empty `catch {}` blocks are ESLint's no-empty.

/** @param {import('estree').Node | null | undefined} body */
function dropsTheError(body) {
  if (!body) return false;
  if (body.type === 'BlockStatement') return body.body.length === 0;
  if (body.type === 'Identifier') return body.name === 'undefined';
  if (body.type === 'Literal') return body.value === null;
  return body.type === 'UnaryExpression' && body.operator === 'void' && body.argument.type === 'Literal';
}

const WRAPPERS = new Set(['AwaitExpression', 'ChainExpression', 'TSAsExpression', 'TSNonNullExpression']);

/** The node whose parent decides what happens to the value, past await, void and casts. */
function valueHolder(node) {
  let n = node;
  while (n.parent && (WRAPPERS.has(n.parent.type) || (n.parent.type === 'UnaryExpression' && n.parent.operator === 'void'))) n = n.parent;
  return n;
}

/** True where nothing receives the value: an expression statement, or the body of an arrow whose value is itself voided. */
function resultDiscarded(node) {
  const holder = valueHolder(node);
  const parent = holder.parent;
  if (!parent) return false;
  if (parent.type === 'ExpressionStatement') return true;
  // `() => void p.catch(() => {})`: the arrow returns nothing.
  return parent.type === 'ArrowFunctionExpression' && parent.body === holder && holder !== node;
}

/** @type {import('eslint').Rule.RuleModule} */
export default {
  meta: {
    type: 'problem',
    docs: { description: 'a promise failure that is dropped needs a comment saying why' },
    messages: {
      silent: 'This .catch drops the error without a word: say why in a comment (inside the handler or on this statement), or handle it.',
    },
    schema: [],
  },
  create(context) {
    const source = context.sourceCode;
    return {
      CallExpression(node) {
        const callee = node.callee;
        if (callee.type !== 'MemberExpression' || callee.computed || callee.property.type !== 'Identifier' || callee.property.name !== 'catch') return;
        const handler = node.arguments[0];
        if (!handler || (handler.type !== 'ArrowFunctionExpression' && handler.type !== 'FunctionExpression')) return;
        if (!dropsTheError(handler.body) || !resultDiscarded(node)) return;
        if (source.getCommentsInside(handler).length > 0) return;
        let statement = node;
        while (statement.parent && !/Statement$|Declaration$/.test(statement.type)) statement = statement.parent;
        const first = statement.loc.start.line - 1;
        const last = statement.loc.end.line;
        if (source.getAllComments().some((c) => c.loc.end.line >= first && c.loc.start.line <= last)) return;
        context.report({ node: handler, messageId: 'silent' });
      },
    };
  },
};
