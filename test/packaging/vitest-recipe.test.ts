/**
 * The vitest matchers recipe of docs/testing.md (section "Matchers for vitest and Jest"), exactly as
 * written: its vitest.config.ts, its tsconfig.json entry and its test file, in a fresh project
 * with the packed package installed, type-checked by tsc against each vitest major the peer range
 * names (`setupFiles` alone leaves `toBeSignedWebhook` untyped, TS2339; vitest 5 renamed
 * `Assertion`'s type parameters, TS2428 for an augmentation written for 4). Runs after
 * `npm run build` (the test command builds first).
 */
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { consumerProject, pinned, root, typeCheck } from './support.ts';

const guide = readFileSync(join(root, 'docs/testing.md'), 'utf8');
const section = /^## Matchers for vitest and Jest\n([\s\S]*?)^#{1,2} /m.exec(guide)?.[1] ?? '';
const fenced = (language: string) => [...section.matchAll(new RegExp(`^\`\`\`${language}\\n([\\s\\S]*?)^\`\`\`$`, 'gm'))].map((match) => match[1] ?? '');
const only = (blocks: string[], what: string): string => {
  if (blocks.length !== 1) throw new Error(`the recipe has ${blocks.length} ${what}, expected 1`);
  return blocks[0] ?? '';
};
const config = only(fenced('ts').filter((block) => block.includes('setupFiles')), 'vitest configs');
const testFile = only(fenced('ts').filter((block) => block.includes('toBeSignedWebhook')), 'test files');
/** The recipe's tsconfig.json, its `//` comment lines dropped. */
const tsconfig = JSON.parse(only(fenced('jsonc'), 'tsconfigs').replace(/^\s*\/\/.*$/gm, '')) as { compilerOptions: Record<string, unknown> };

// The app's own names the test file takes for granted (what the relay under test forwarded).
const placeholders = 'declare const forwarded: Request;\ndeclare const unattempted: Request;\ndeclare const tampered: Request;\ndeclare const destinationSecret: string;\n';

/**
 * The vitest majors of the peer range, each at an exact version: 4 as this repository tests with
 * it, 5 pinned here (the consumer installs it from the registry; the repository's own tests run
 * on 4). vitest 5's optional peer range for `@types/node` starts at 22.
 */
const majors = [
  { major: 4, spec: pinned('vitest'), nodeTypes: pinned('@types/node') },
  { major: 5, spec: 'vitest@5.1.2', nodeTypes: '@types/node@^24.0.0' },
] as const;

it('the peer range names exactly the majors tested here', () => {
  const manifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { peerDependencies: Record<string, string> };
  expect(manifest.peerDependencies.vitest).toBe(majors.map(({ major }) => `^${major}.0.0`).join(' || '));
  expect(guide).toContain(`tested with vitest ${majors.map(({ major }) => major).join(' and ')} (the peer range is \`${manifest.peerDependencies.vitest}\`)`);
});

// tsc over vitest's types takes tens of seconds on a loaded two-core machine.
describe.each(majors)("the guide's vitest matchers recipe, vitest $major", { timeout: 300_000 }, ({ major, spec, nodeTypes }) => {
  let project: string;

  beforeAll(() => {
    project = consumerProject([spec, nodeTypes]);
    writeFileSync(join(project, 'vitest.config.ts'), config);
    writeFileSync(join(project, 'relay.test.ts'), testFile);
    writeFileSync(join(project, 'placeholders.d.ts'), placeholders);
    // An ESM project as vitest's users have it; the recipe's compilerOptions over a strict nodenext base.
    writeFileSync(join(project, 'package.json'), JSON.stringify({ ...JSON.parse(readFileSync(join(project, 'package.json'), 'utf8')), type: 'module' }));
  }, 400_000);

  afterAll(() => {
    if (project) rmSync(project, { recursive: true, force: true });
  });

  function writeTsconfig(name: string, compilerOptions: Record<string, unknown>): void {
    const base = { module: 'nodenext', moduleResolution: 'nodenext', target: 'es2022', strict: true, noEmit: true, skipLibCheck: true };
    writeFileSync(join(project, name), JSON.stringify({ compilerOptions: { ...base, ...compilerOptions }, files: ['vitest.config.ts', 'relay.test.ts', 'placeholders.d.ts'] }, null, 2));
  }

  it('installs the major under test', () => {
    const installed = JSON.parse(readFileSync(join(project, 'node_modules/vitest/package.json'), 'utf8')) as { version: string };
    expect(installed.version.split('.')[0]).toBe(String(major));
  });

  it('sets the matchers up through setupFiles and the tsconfig types entry', () => {
    expect(config).toContain("setupFiles: ['webhook-receiver/vitest']");
    expect(tsconfig.compilerOptions.types).toContain('webhook-receiver/vitest');
    expect(testFile).not.toContain("import 'webhook-receiver/vitest'");
  });

  it('type-checks exactly as written', () => {
    writeTsconfig('tsconfig.json', tsconfig.compilerOptions);
    expect(typeCheck(project, 'tsconfig.json')).toEqual({ code: 0, output: '' });
  });

  // A conflicting augmentation (TS2428) is reported in the package's own declarations, so only a
  // project that checks library files sees it: many do not set skipLibCheck.
  it('type-checks exactly as written with skipLibCheck off', () => {
    writeTsconfig('tsconfig.libcheck.json', { ...tsconfig.compilerOptions, skipLibCheck: false });
    expect(typeCheck(project, 'tsconfig.libcheck.json')).toEqual({ code: 0, output: '' });
  });

  it('fails without the types entry: setupFiles alone leaves the matchers untyped (TS2339)', () => {
    const types = (tsconfig.compilerOptions.types as string[]).filter((entry) => entry !== 'webhook-receiver/vitest');
    writeTsconfig('tsconfig.setup-only.json', { ...tsconfig.compilerOptions, types });
    const { code, output } = typeCheck(project, 'tsconfig.setup-only.json');
    expect(code).toBe(2);
    // vitest 4 names the type Assertion<Request>, vitest 5 Assertion<void, Request>.
    expect(output).toMatch(/error TS2339: Property 'toBeSignedWebhook' does not exist on type 'Assertion<(void, )?Request>'\./);
    expect(output).toMatch(/error TS2339: Property 'toBeUnsignedWebhook' does not exist on type 'Assertion<(void, )?Request>'\./);
  });

  it('types the matchers with vitest globals too', () => {
    writeFileSync(join(project, 'globals.test.ts'), `${testFile.replace(/^import \{ expect, test \} from 'vitest';$/m, '')}\nexport {};\n`);
    const base = { module: 'nodenext', moduleResolution: 'nodenext', target: 'es2022', strict: true, noEmit: true, skipLibCheck: true };
    const types = ['vitest/globals', ...(tsconfig.compilerOptions.types as string[])];
    writeFileSync(join(project, 'tsconfig.globals.json'), JSON.stringify({ compilerOptions: { ...base, ...tsconfig.compilerOptions, types }, files: ['globals.test.ts', 'placeholders.d.ts'] }));
    expect(typeCheck(project, 'tsconfig.globals.json')).toEqual({ code: 0, output: '' });
  });
});
