// A Babel plugin for Jest (CommonJS modules): `import.meta.url` becomes the file's URL. The
// N-API bindings (tests/generated/napi) pass it to @ubjs/node to find the Rust library.
module.exports = function importMetaUrl({ template }) {
  const fileUrl = template.expression.ast`require('url').pathToFileURL(__filename).href`;
  return {
    visitor: {
      MetaProperty(path) {
        const parent = path.parentPath;
        if (
          path.node.meta.name === 'import' &&
          parent.isMemberExpression() &&
          !parent.node.computed &&
          parent.node.property.name === 'url'
        ) {
          parent.replaceWith(fileUrl);
        }
      },
    },
  };
};
