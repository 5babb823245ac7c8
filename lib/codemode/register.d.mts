// `isolet/codemode/register` has no exports: importing it registers the module hook.
export {};
