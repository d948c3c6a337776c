import type { TestProject } from 'vitest/node';

/**
 * Whether the run holds only the unit tier (`--project unit`), which needs no server: the global
 * setups then start none, so `npm run test:unit` runs where redis-server and PostgreSQL are not
 * installed.
 */
export function onlyUnitTier(project: TestProject): boolean {
  const names = project.vitest.projects.map((each) => each.name);
  return names.length > 0 && names.every((name) => name === 'unit');
}
