// One linter for the whole tree: typescript-eslint's type-checked rules plus the promise and import rules
// a service full of async I/O needs.
import eslint from '@eslint/js';
import tseslint from 'typescript-eslint';

/** What `@types/jest` declares globally (its top-level `declare`s). */
const JEST_GLOBALS = [
  ...['afterAll', 'afterEach', 'beforeAll', 'beforeEach', 'describe', 'expect', 'fail', 'fdescribe', 'fit', 'it'],
  ...['jasmine', 'jest', 'pending', 'spyOn', 'test', 'xdescribe', 'xit', 'xtest'],
];

export default tseslint.config(
  { ignores: ['dist/', 'node_modules/', 'coverage/', '.data/', 'apps/console/dist/', 'test/api/ledger-api.ts'] },
  eslint.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/consistent-type-imports': ['error', { fixStyle: 'inline-type-imports' }],
      // `{ type: _type, ...rest }` omits a field; a leading underscore says "unused on purpose".
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none', ignoreRestSiblings: true },
      ],
      // Methods that implement a Promise-returning interface stay `async` so a throw becomes a rejection.
      '@typescript-eslint/require-await': 'off',
      // Passing a caught error on unchanged keeps its class and stack.
      '@typescript-eslint/prefer-promise-reject-errors': ['error', { allowThrowingUnknown: true }],
    },
  },
  {
    // Tests and benches read untyped JSON answers and check them; typing every body would repeat the schemas.
    files: ['test/**/*.ts', 'bench/**/*.ts', '**/*.spec.ts'],
    rules: {
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
      '@typescript-eslint/no-explicit-any': 'off',
    },
  },
  {
    // The build compiles the tests in the same program (decision 0058), so Jest's globals are typed everywhere:
    // the service, the libraries, the benches and the test helpers (some of which the benches import) must not
    // use them. A helper for tests alone imports what it uses from `@jest/globals`.
    files: ['apps/**/*.ts', 'libs/**/*.ts', 'bench/**/*.ts', 'test/support/**/*.ts'],
    ignores: ['**/*.spec.ts', '**/testing/**'],
    rules: {
      'no-restricted-globals': [
        'error',
        ...JEST_GLOBALS.map((name) => ({ name, message: 'a Jest global, which exists only in tests' })),
      ],
    },
  },
  { files: ['**/*.js', '**/*.mjs'], extends: [tseslint.configs.disableTypeChecked] },
);
