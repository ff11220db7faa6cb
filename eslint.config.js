// ESLint (flat config) for the JavaScript of the repository: the web page
// (web/*.js, ES modules in a browser, xterm.js from its <script> tags) and
// the Node tests (tests/**/*.mjs, fuzz/*.mjs, bench/*.mjs). eslint's recommended rules,
// nothing of style (the C code has clang-format; the JS keeps its own
// compact style). tools/check-lint.sh runs it in make test's static checks.
// CommonJS: the repository's package.json declares no "type".
'use strict';
const js = require('@eslint/js');
const globals = require('globals');

module.exports = [
  { ignores: ['node_modules/**', 'build*/**'] },
  js.configs.recommended,
  {
    files: ['web/**/*.js'],
    languageOptions: {
      ecmaVersion: 2022,
      sourceType: 'module',
      globals: { ...globals.browser, Terminal: 'readonly', FitAddon: 'readonly' },
    },
  },
  {
    files: ['tests/**/*.mjs', 'fuzz/**/*.mjs', 'bench/**/*.mjs'],
    languageOptions: { ecmaVersion: 2022, sourceType: 'module', globals: { ...globals.node } },
  },
  {
    // the page tests pass functions to the browser (playwright's page.evaluate)
    files: ['tests/web/*.mjs', 'tests/integration/web_*.mjs'],
    languageOptions: { globals: { ...globals.browser } },
  },
  {
    files: ['eslint.config.js'],
    languageOptions: { sourceType: 'commonjs', globals: { ...globals.node } },
  },
  {
    rules: {
      // `catch { /* not yet */ }` is how the tests poll: an empty block with a comment
      'no-empty': ['error', { allowEmptyCatch: true }],
      // unused arguments keep callback signatures readable; unused variables are errors
      'no-unused-vars': ['error', { args: 'none', caughtErrors: 'none' }],
      // terminal bytes are what the tests and the page read: escapes in regexps are meant
      'no-control-regex': 'off',
    },
  },
];
