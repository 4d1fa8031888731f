package hostile

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// The value corpora: what a hostile or careless tenant writes into fields of a given
// meaning. Each is a mix of valid forms that are odd (1h30m, CRON_TZ=..., Local) and forms
// that must be refused by the API server or handled by the operator as a failure of the
// one object. None contains the word the suite greps the operator's log for.

// durations: every form of a Go duration and what looks like one.
var durations = []string{
	"0s", "1ns", "1us", "1µs", "1.5h", "1h30m", "500ms", "0.5s", "1h1h1h", "00000000000000000001s",
	"0.0000000001s", "2562047h", "2562047h47m16.854775807s", "2562047h47m16.854775808s",
	"9999999999h", "99999999999999999999s", "1" + strings.Repeat("0", 40) + "ns",
	"-1s", "", " ", "1d", "1w", "1 h", "1h ", "1e9s", "+1s", "1.s", ".5s", "1h-30m", "PT1H",
	"garbage", "NaN", "∞", "١s", "1ｓ", "1s\n", "1s\x00",
}

// cronSchedules: robfig/cron standard forms, extensions it takes, and what it must refuse
// or can never fire.
var cronSchedules = []string{
	"0 3 * * *", "* * * * *", "0 2 * * 1-5", "TZ=UTC 0 3 * * *", "CRON_TZ=Europe/Paris 0 3 * * *",
	"CRON_TZ=America/Argentina/ComodRivadavia 30 1 * * *", "@daily", "@hourly", "@yearly", "@midnight",
	"@every 1s", "@every 1ns", "@every 0s", "@every -1s", "@every 9999999999h", "@every", "@every garbage",
	"0 0 3 * * *", "0 0 3 * * * *", "0 3 * * MON-FRI", "0 3 * JAN,FEB SUN", "0 3 * * mon",
	"61 25 32 13 8", "0 3 30 2 *", "0 3 31 4 *", "*/0 * * * *", "0-59/99999999999999999999 * * * *",
	"59-0 * * * *", "0 3 L * *", "0 3 ? * *", "0 3 1W * *", "H 3 * * *", "@reboot",
	"CRON_TZ=../../etc/passwd 0 3 * * *", "TZ=Local * * * * *", "CRON_TZ= 0 3 * * *",
	"TZ=Mars/Olympus 0 3 * * *", "TZ=UTC", "CRON_TZ=UTC CRON_TZ=UTC 0 3 * * *", "", " ", "garbage",
	"0 3 * * *\n0 4 * * *", "０ ３ * * *", "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30 * * * *",
}

// timeZones: IANA names, odd ones, and paths.
var timeZones = []string{
	"UTC", "Europe/Paris", "Asia/Kathmandu", "Australia/Lord_Howe", "America/Argentina/ComodRivadavia",
	"Etc/GMT+14", "Etc/GMT-14", "EST5EDT", "Local", "", "utc", "GMT+25", "Mars/Olympus",
	"../../etc/passwd", "/etc/localtime", "..", "Europe/../Europe/Paris", "Europe/Paris\x00", "%00",
	"Europe/Paris ", "Europe\\Paris", "Ελλάδα/Αθήνα",
}

// oddStrings: control characters, non-ASCII, and strings that mean something elsewhere.
var oddStrings = []string{
	"", " ", "\t", "\n", "\r\n", "\x00", "\x01\x02\x03\x1b[31m\x7f", controlChars(), "\u0085", "\u2028\u2029",
	"\u202egnp.exe", "\ufeff", "\uffff", "\U0010ffff", "\xff\xfe", "é", "a\u0301", "日本語", "😀", "İı",
	"ｆｕｌｌｗｉｄｔｈ", "../../etc/passwd", "%2e%2e%2f", "'; DROP TABLE pipelines; --", `"quoted"`,
	"`id`", "${HOME}", "{{ .Values }}", "%s%n%x", "<script>alert(1)</script>", "null", "true", "0",
	"-0", "1e309", "NaN", "~", "- a", "key: value", "a\nb: c",
}

func controlChars() string {
	var b strings.Builder
	for c := rune(0); c < 0x20; c++ {
		b.WriteRune(c)
	}
	return b.String()
}

// executorNames: the executors the operator offers with --enable-test-executors (those
// the suite drives), names it does not have, and names the pattern refuses.
var executorNames = []string{
	"test.noop", "test.record", "node.drain", "node.cordon", "node.delete", "k8s.apply", "k8s.wait", "k8s.scale",
	"no.such.executor", "vsphere.terminate-vm", "test", "test.noop.extra", "test..noop", "Test.Noop",
	"test.noop ", ".test", "test-", "example.greet",
}

// apiVersions and resourceKinds: of a trigger's resource. The operator of the suite
// allows triggers on nodes and configmaps only.
var (
	apiVersions   = []string{"v1", "v1", "apps/v1", "stepwise.dev/v1alpha1", "demo.stepwise.dev/v1alpha1", "v2", "/v1", "v1/", "a/b/c", "V1", " v1", "v1\x00"}
	resourceKinds = []string{"ConfigMap", "Node", "Secret", "Pod", "Namespace", "Pipeline", "PipelineTrigger", "WebApp", "configmap", "Nodes", "ConfigMapList", "Node\x00", "🙂"}
)

// fieldPaths: of matchFields and of $(object.PATH).
var fieldPaths = []string{
	"metadata.name", "metadata.namespace", "spec.unschedulable", "spec.providerID", "data.k",
	"metadata.labels['hostile.stepwise.dev/bait']", "metadata.annotations['x']", "metadata.labels[", "metadata.labels['a']['b']",
	"metadata..name", ".", "", "metadata", "metadata.managedFields", "status.conditions[0].type", "status.conditions[-1]",
	"spec.taints[*].key", "{.metadata.name}", "metadata.name'])", "$(object.metadata.name)",
	strings.Repeat("a.", 500) + "a", strings.Repeat("[0]", 300),
}

// labelKeys, selectorOperators: of a trigger's selector, which the CRD does not check.
var (
	labelKeys         = []string{"hostile.stepwise.dev/bait", "", "a/b/c", "-x", "UPPER", "a b", strings.Repeat("k", 64), "example.com/" + strings.Repeat("k", 64), "kubernetes.io/", "é", "!"}
	selectorOperators = []string{"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "in", "", "==", "Exists "}
)

// references: of params and step parameters.
var references = []string{
	"$(params.node)", "$(params.missing)", "$(params.)", "$(params", "$(params.node", "$()", "$(", ")",
	"$(params.node)$(params.node)", "$(steps.s0.outputs.value)", "$(steps.later.outputs.value)",
	"$(steps.s0.outputs.)", "$(steps..outputs.value)", "$(steps.s0.outputs.value.extra)", "$(steps.s0)",
	"$$(params.node)", "$(params.$(params.node))", `\$(params.node)`, "$(object.metadata.name)",
	"$(object.metadata.labels['x'])", "$(PARAMS.node)", "$( params.node )", "$(params.node\x00)", "$(params.nodé)",
	"$(steps." + strings.Repeat("s", 63) + ".outputs.k)", "$(params.a)", "$(env.HOME)", "$(context.pipeline.name)",
}

// jsonPaths: of k8s.wait.
var jsonPaths = []string{
	"{.data.k}", `{.status.conditions[?(@.type=="Ready")].status}`, "{range .items[*]}{.metadata.name}{end}",
	"{..}", "{$..*}", "{.a.b.c[99999999999]}", "{.data.k", "{{{{", "", "{@}", "{.}", `{"\}`, "{.data[-1:]}",
	"{.data[::0]}", "{.data[0:0:0]}", "{.data[?(@.x=~/a/)]}", strings.Repeat("{.metadata.name}", 1000),
	strings.Repeat("{range .a}", 500) + strings.Repeat("{end}", 500), "{range .a}", "{end}",
}

// labelSelectors: of node.drain's podSelector.
var labelSelectors = []string{
	"app=x", "", "!", "a in (", "a notin ()", "x,,y", "a=b,c!=d", "=", "a==b==c", "a/b/c=d", "é=1",
	strings.Repeat("k", 64) + "=v", "a in (" + strings.Repeat("v,", 2000) + "v)",
}

// drainRules: of node.drain's rules, a YAML list of drain rules: valid ones, what their
// parser or selectors refuse, and what amplifies (aliases, nesting, many rules, long lists).
var drainRules = []string{
	"- {podSelector: {matchLabels: {app: ceph}}, behavior: Drain, order: 10}",
	"- {name: cache, behavior: Skip, namespaces: [kube-system]}\n- {behavior: WaitCompleted, nodeSelector: {matchLabels: {pool: a}}}",
	"- {behavior: Evict}", "- {behavior: Skip, order: 5}", "- {behavior: Drain, order: 99999999999}", "- {}", "[]", "{}", "", "- null",
	"- {behavior: Drain, podSelector: {matchExpressions: [{key: app, operator: In}]}}",
	"- {behavior: Drain, podSelector: {matchExpressions: [{key: app, operator: Exists, values: [x]}]}}",
	"- {behavior: Drain, podSelector: {matchExpressions: [{key: 'a b', operator: Gt, values: ['1']}]}}",
	"- {behavior: Drain, podSelector: {matchLabels: {'-bad': '/x'}}}",
	"- {behavior: Drain, unknownField: 1}", "- behavior: Drain\n  behavior: Skip",
	strings.Repeat("- {behavior: Drain, order: 1}\n", 33),
	"- {behavior: Drain, podSelector: {matchExpressions: [{key: app, operator: In, values: [" + strings.Repeat("v,", 5000) + "v]}]}}",
	"- {behavior: Drain, namespaces: [" + strings.Repeat("n,", 5000) + "n]}",
	"l0: &l0 [a]\n" + "l1: &l1 [*l0,*l0,*l0,*l0,*l0,*l0,*l0,*l0,*l0]\nl2: &l2 [*l1,*l1,*l1,*l1,*l1,*l1,*l1,*l1,*l1]\n" +
		"rules: [*l2,*l2,*l2,*l2,*l2,*l2,*l2,*l2,*l2]",
	"- &r {behavior: Drain, namespaces: &n [a, b, c]}\n" + strings.Repeat("- *r\n", 31),
	strings.Repeat("[", 10000) + strings.Repeat("]", 10000),
}

// intStrings and boolStrings: of integer and boolean executor parameters.
var (
	intStrings  = []string{"-1", "0", "30", "9223372036854775807", "9223372036854775808", "-9223372036854775809", "1.5", "1e3", "", "x", "0x10", " 1", "٣"}
	boolStrings = []string{"true", "false", "True", "1", "yes", "", "maybe", "true\n"}
)

// objectNames: of nodes, ConfigMaps, namespaces named by executor parameters.
func (g *Generator) objectNames() []string {
	e := g.env
	names := append([]string{}, e.Nodes...)
	return append(names, append(e.ConfigMaps,
		"", "missing", e.Foreign, "kube-system", "default", "..", "a/b", "UPPER", strings.Repeat("n", 254), "stepwise-executors")...)
}

// serviceAccountNames: valid ones of the tenant's namespace, missing ones, and names that
// would make a different user name if pasted into system:serviceaccount:NS:NAME.
func (g *Generator) serviceAccountNames() []string {
	return append(g.env.ServiceAccounts(),
		"missing-sa", "Runner", "kube-system:default", g.env.Foreign+":default", "*", "system:masters",
		"../default", "default\n", "a.b.c", strings.Repeat("a", 253), strings.Repeat("a", 254))
}

// yamlDocs are k8s.apply manifests; max is the bound on a parameter's value (0: none).
func (g *Generator) yamlDoc(max int) (doc, what string) {
	name := g.hostileName()
	cm := func(ns string) string {
		meta := "metadata:\n  name: " + name + "\n"
		if ns != "" {
			meta += "  namespace: " + ns + "\n"
		}
		return "apiVersion: v1\nkind: ConfigMap\n" + meta + "data:\n  k: v\n"
	}
	switch g.rng.IntN(26) {
	case 0:
		return cm(""), "a ConfigMap"
	case 1:
		return cm(g.env.Foreign), "a ConfigMap in the canary's namespace"
	case 2:
		return cm("kube-system"), "a ConfigMap in kube-system"
	case 3:
		return billionLaughs(9, 9), "billion laughs (aliases)"
	case 4:
		return billionLaughs(6, 20) + "data: {k: *l6}\n", "billion laughs in data"
	case 5:
		n := 1 + g.rng.IntN(20000)
		return strings.Repeat("[", n) + strings.Repeat("]", n), fmt.Sprintf("%d nested flow sequences", n)
	case 6:
		n := 1 + g.rng.IntN(300)
		var b strings.Builder
		for i := range n {
			b.WriteString(strings.Repeat(" ", i) + "a:\n")
		}
		return b.String(), fmt.Sprintf("%d nested block mappings", n)
	case 7:
		n := 2 + g.rng.IntN(200)
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s-%d\n", name, i)
		}
		return b.String(), fmt.Sprintf("%d documents", n)
	case 8:
		return strings.Repeat("---\n", 1+g.rng.IntN(5000)), "empty documents"
	case 9:
		return cm("") + "...\n---\n...\n", "document end markers"
	case 10:
		return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: " + name + "}\ndata:\n" +
			"  a: !!binary aGVsbG8=\n  b: !!python/object/apply:os.system [\"id\"]\n  c: !custom x\n" +
			"  d: !!float .nan\n  e: !!timestamp 2001-12-14t21:59:43.10-05:00\n  f: !!int 0x7fffffffffffffffffff\n  g: !!set {a, b}\n", "tags"
	case 11:
		return "base: &b {apiVersion: v1, kind: ConfigMap}\n<<: *b\nmetadata: {name: " + name + "}\n", "merge key"
	case 12:
		return "? [a, b]\n: c\n? {x: y}\n: d\n", "complex keys"
	case 13:
		return "%YAML 1.1\n%TAG !e! tag:evil.example,2000:\n---\n!e!cm {apiVersion: v1, kind: ConfigMap, metadata: {name: " + name + "}}\n", "directives"
	case 14:
		return `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"` + name + `"},"data":{"k":"v"}}`, "JSON"
	case 15:
		return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: " + name + "}\nmetadata: {name: other}\n", "duplicate keys"
	case 16:
		return "\ufeff" + strings.ReplaceAll(cm(""), "\n", "\r\n"), "BOM and CRLF"
	case 17:
		return "apiVersion: v1\n\tkind: ConfigMap\n", "tab indentation"
	case 18:
		return cm("") + "\x00", "NUL byte"
	case 19:
		n := 1000
		if max > 100 {
			n = max - 100 + g.rng.IntN(200)
		}
		return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: " + name + "}\ndata:\n  k: " + strings.Repeat("x", n) + "\n", fmt.Sprintf("a %d-byte scalar", n)
	case 20:
		return "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {name: " + name + "}\n" +
			"roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}\n" +
			"subjects: [{kind: ServiceAccount, name: runner, namespace: " + g.env.Namespace + "}]\n", "a ClusterRoleBinding to cluster-admin"
	case 21:
		return "apiVersion: v1\nkind: Namespace\nmetadata: {name: " + name + "}\n", "a Namespace"
	case 22:
		return "apiVersion: v1\nkind: List\nitems:\n- " + strings.ReplaceAll(strings.TrimSpace(cm(g.env.Foreign)), "\n", "\n  ") + "\n", "a List reaching the canary's namespace"
	case 23:
		return "apiVersion: stepwise.dev/v1alpha1\nkind: Pipeline\nmetadata: {name: " + name + "}\n" +
			"spec: {steps: [{name: s, executor: test.noop}]}\n", "a Pipeline"
	case 24:
		return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: \"$(params.node)\"}\ndata: {\"$(params.node)\": \"$(steps.s0.outputs.value)\"}\n", "references in keys and names"
	default:
		return g.pick(oddStrings), "odd string"
	}
}

// billionLaughs is a document whose aliases expand to width^levels scalars.
func billionLaughs(levels, width int) string {
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: hostile-laughs}\nl0: &l0 \"lol\"\n")
	for i := 1; i <= levels; i++ {
		refs := make([]string, width)
		for j := range refs {
			refs[j] = fmt.Sprintf("*l%d", i-1)
		}
		fmt.Fprintf(&b, "l%d: &l%d [%s]\n", i, i, strings.Join(refs, ","))
	}
	return b.String()
}

// userNames: who an Approval, an approval policy or a trigger's pause says decides: the
// tenant as the API server knows it, the other identities of its namespace and of the
// canary's, the cluster's own, and the tenant's name a character off. Only the first is
// the requester's: the install's admission policy refuses the others on an Approval.
func (g *Generator) userNames() []string {
	if g.users == nil {
		e := g.env
		sa := func(ns, name string) string { return "system:serviceaccount:" + ns + ":" + name }
		g.users = []string{
			e.TenantUser, e.TenantUser, sa(e.Namespace, e.Runner), sa(e.Namespace, e.Watcher), sa(e.Namespace, "default"),
			sa(e.Foreign, "default"), sa("kube-system", "default"), "system:admin", "kubernetes-admin", "admin",
			"system:anonymous", "system:kube-controller-manager", "alice@example.com",
			e.TenantUser + " ", " " + e.TenantUser, strings.ToUpper(e.TenantUser), e.TenantUser + "\x00",
			e.TenantUser + ":x", strings.TrimSuffix(e.TenantUser, e.Tenant), "", strings.Repeat("u", 512), strings.Repeat("u", 513),
		}
	}
	return g.users
}

// groupNames: groups an Approval or an approval policy names: the tenant's, and groups it
// is not in, some of them mighty.
func (g *Generator) groupNames() []string {
	if g.groups == nil {
		g.groups = append(slices.Clone(g.env.TenantGroups),
			"system:masters", "system:serviceaccounts:"+g.env.Foreign, "system:nodes", "system:unauthenticated",
			"stepwise-approvers", "SYSTEM:MASTERS", "system:authenticated ", "", " ", strings.Repeat("g", 512), strings.Repeat("g", 513))
	}
	return g.groups
}

// approvalTargets: pipelines an Approval names: generated ones, one that may come later,
// names of other kinds, the canary's (in another namespace), and names the pattern refuses.
func (g *Generator) approvalTargets() []string {
	out := []string{
		"missing", "canary-1", fmt.Sprintf("p-%04d", g.n+1), fmt.Sprintf("trg-%04d", max(1, g.n-1)), g.env.Foreign,
		strings.Repeat("p", 253), strings.Repeat("p", 254), "P-0001", "", "a..b", "p/../x", g.env.Foreign + "/canary-1",
	}
	if len(g.pipelines) > 0 {
		out = append(out, g.pick(g.pipelines), g.pick(g.pipelines), g.pick(g.pipelines))
	}
	if len(g.templates) > 0 {
		out = append(out, g.pick(g.templates))
	}
	return out
}

// stepRefs: steps an Approval names. The base steps are s0, s1, s2.
var stepRefs = []string{"s0", "s1", "s2", "s3", "missing", strings.Repeat("s", 63), strings.Repeat("s", 64), "S0", "", "s0 ", "-s0", "s_0", "s0\x00"}

// approvalRequest is a request an Approval names: another wait's, one of the right shape
// that no wait has, and what the pattern refuses.
func (g *Generator) approvalRequest() string {
	switch g.rng.IntN(3) {
	case 0:
		return g.someRequest()
	case 1:
		return g.pick([]string{"0", strings.Repeat("f", 64), "ffffffffffffffff", "0000000000000000", strconv.FormatUint(g.rng.Uint64(), 36)})
	}
	return g.pick([]string{
		strings.Repeat("f", 65), "DEADBEEF", "dead-beef", "", " abc", "abc\n", "é", "$(steps.s0.approval.request)",
		"../abc", "abc def", "0x1f", "١٢٣",
	})
}

// comments: of Approvals, which a rejection makes the step's failure message.
var comments = []string{
	"lgtm", "", strings.Repeat("c", 1024), strings.Repeat("c", 1025), strings.Repeat("😀", 1024), strings.Repeat("é", 1024),
	"line one\nline two\r\n", "$(params.node)", "$(steps.s0.outputs.value)", "%s%n%x", "<script>alert(1)</script>",
	"\x1b[31mred\x1b[0m", "rejected: \x00", "key: value\n- item",
}
