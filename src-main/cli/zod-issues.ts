// zod's issues as lines a user reads: "config file c.json: train.steps: Invalid input: expected
// number, received string", one per problem (never zod's JSON dump of them).
import type { z } from 'zod';

export function zodIssueLines(where: string, issues: readonly z.core.$ZodIssue[]): string[] {
  return issues.map((i) => `${where}: ${i.path.length ? i.path.map(String).join('.') : '(top level)'}: ${i.message}`);
}
